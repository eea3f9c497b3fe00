"""Which vocabulary entries are negation cues: the keys that negation-aware heads look at.

"我不是要提额，是想查额度" and "I did not get my card" turn on one small word. A
negation-aware head (``ModelConfig.negation_heads``) gets a learned score bias towards
keys that are negation cues, as number-aware heads do for numbers
(:mod:`headwise.text.number_tokens`). A vocabulary entry is a cue when it is

* a Chinese negator character (:data:`NEGATION_CHARACTERS`: 不, 没, 别, 无, 未, 非, 莫,
  勿, 否), alone, which is what a character vocabulary holds; compounds such as 不是 or
  没有 then flag their first character; or
* an English negator word (:data:`ENGLISH_NEGATORS`: "not", "never", "without", the
  first pieces of contractions such as "didn" / "don"), matched case-insensitively as a
  whole token (WordPiece continuations ``##...`` are never cues).

Words that merely contain a negator (别人, 无聊, "nothingness") stay unflagged in a word
vocabulary; in a character vocabulary the character is flagged wherever it occurs, a
cue the model learns to weigh, not a parser.

A cue's scope, for heads scoped to the clause (``ModelConfig.negation_scope="clause"``),
ends at a clause break (:data:`CLAUSE_BREAKS`: the Chinese and ASCII comma, full stop,
question and exclamation marks, semicolon, a newline), the classic approximation of
negation scope (Das and Chen 2001; Pang et al. 2002: "up to the first punctuation mark"),
here in both directions, since Chinese takes a request back after it as often as before
(提额就不用了).
"""

from __future__ import annotations

from headwise.text.tokenizer import Tokenizer

__all__ = ["CLAUSE_BREAKS", "ENGLISH_NEGATION_WORDS", "ENGLISH_NEGATORS", "NEGATION_CHARACTERS",
           "clause_break_token_ids", "is_negation_piece", "negation_token_ids"]

#: Chinese characters that negate on their own
NEGATION_CHARACTERS = "不没别无未非莫勿否"
#: English words that negate on their own (with and without the apostrophe)
ENGLISH_NEGATION_WORDS: tuple[str, ...] = (
    "not", "no", "never", "none", "nothing", "nobody", "nowhere", "neither", "nor",
    "without", "cannot", "unable", "can't", "don't", "doesn't", "didn't", "isn't", "aren't",
    "wasn't", "weren't", "won't", "wouldn't", "shouldn't", "couldn't", "haven't", "hasn't",
    "hadn't", "dont", "didnt", "doesnt", "isnt", "arent", "wasnt", "werent", "wont", "cant",
    "couldnt", "shouldnt", "wouldnt", "havent", "hasnt", "hadnt")
#: the vocabulary entries that are English cues: those words, and the first WordPiece
#: pieces of the negated contractions ("didn" of "didn't"; not "can" or "won"), and "n't"
ENGLISH_NEGATORS = frozenset(ENGLISH_NEGATION_WORDS) | {
    w.split("'")[0] for w in ENGLISH_NEGATION_WORDS
    if w.endswith("n't") and w not in ("can't", "won't")} | {"n't"}
#: the vocabulary entries that end a clause, and with it a negation cue's scope
CLAUSE_BREAKS = frozenset("，。？！；,.?!;\n")


def is_negation_piece(token: str) -> bool:
    """Whether one vocabulary entry is a negation cue.

    >>> [is_negation_piece(t) for t in ["不", "没", "是", "Not", "didn", "##not", "note"]]
    [True, True, False, True, True, False, False]
    """
    if not token or token.startswith("##"):
        return False
    if len(token) == 1 and token in NEGATION_CHARACTERS:
        return True
    return token.lower() in ENGLISH_NEGATORS


def negation_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Sorted ids of the vocabulary entries that are negation cues."""
    vocab = tokenizer.backend.get_vocab()
    return sorted(i for token, i in vocab.items() if is_negation_piece(token))


def clause_break_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Sorted ids of the vocabulary entries that end a clause (:data:`CLAUSE_BREAKS`)."""
    vocab = tokenizer.backend.get_vocab()
    return sorted(i for token, i in vocab.items() if token in CLAUSE_BREAKS)

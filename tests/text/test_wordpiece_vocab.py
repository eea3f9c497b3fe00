"""The WordPiece vocabulary builder: the same vocabulary in every process (the library's
trainer gives another one in each, huggingface/tokenizers#1794), the library's merges where
its answer does not hang on a tie, ties to the pair of smaller ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tiny_corpus import INTENTS
from tokenizers import Tokenizer as Backend
from tokenizers import normalizers, pre_tokenizers, trainers
from tokenizers.models import WordPiece

from headwise.text.tokenizer import DEFAULT_SPECIAL_TOKENS, Tokenizer
from headwise.text.wordpiece_vocab import learn_wordpiece_vocab

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [t for ts in INTENTS.values() for t in ts] * 3
SPECIALS = list(DEFAULT_SPECIAL_TOKENS.values())


def _ids(tok: Tokenizer) -> list[str]:
    return [t for t, _ in sorted(tok.backend.get_vocab().items(), key=lambda kv: kv[1])]


def test_the_same_vocabulary_in_every_process(tmp_path):
    # the tokenizers trainer gave this corpus other tokens (not only other ids) per process
    code = ("import sys\nfrom tiny_corpus import INTENTS\nfrom headwise.text import Tokenizer\n"
            "texts = [t for ts in INTENTS.values() for t in ts] * 3\n"
            "Tokenizer.train_wordpiece(texts, 120, min_frequency=1).save(sys.argv[1])\n")
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    runs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / seed)],
                             env={**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": seed},
                             stderr=subprocess.PIPE, text=True) for seed in ("1", "2")]
    for run in runs:
        assert run.wait(timeout=120) == 0, run.stderr.read()
    files = [(tmp_path / seed / "tokenizer.json").read_bytes() for seed in ("1", "2")]
    assert files[0] == files[1]
    here = Tokenizer.train_wordpiece(TEXTS, 120, min_frequency=1)
    assert json.loads(files[0])["model"]["vocab"] == here.backend.get_vocab()
    # a vocabulary as before: specials first, the size asked for, words whole, no [UNK]
    assert _ids(here)[:5] == SPECIALS and here.pad_token_id == 0
    assert here.vocab_size == 120
    tokens = here.tokenize("Send my friend the money from my account")
    assert "[UNK]" not in tokens and {"send", "my", "money"} <= set(tokens)
    assert here.tokenize("zebra 7") == ["[UNK]", "[UNK]"]  # no z, no 7 in the corpus


def test_the_libraries_merges_where_no_tie_decides():
    # hand-checked: every merge below wins by its count alone (##o ##w 151, ##n ##ow 119,
    # k ##now 99, know ##n 53, o ##w 52, ##e ##r 42, l ##ow 32, low ##er 24, s ##now 20);
    # the next one would tie (n ##e and ##w ##er, 18 each)
    words = {"known": 53, "ow": 52, "know": 46, "lower": 24, "snow": 20, "newer": 18,
             "lowest": 8}
    merged = ["##ow", "##now", "know", "known", "ow", "##er", "low", "lower", "snow"]
    texts = [" ".join([w] * n) for w, n in words.items()]
    ours = _ids(Tokenizer.train_wordpiece(texts, 30, min_frequency=1))
    backend = Backend(WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.train_from_iterator(texts, trainer=trainers.WordPieceTrainer(
        vocab_size=30, min_frequency=1, show_progress=False, special_tokens=SPECIALS,
        continuing_subword_prefix="##"))
    library = [t for t, _ in sorted(backend.get_vocab().items(), key=lambda kv: kv[1])]
    alphabet = list("eklnorstw")
    continuing = ["##" + c for c in "enorstw"]
    assert ours == SPECIALS + alphabet + continuing + merged
    # the library numbers the ## pieces in hash-map order: only their set is the same
    assert library[:14] == ours[:14] and library[21:] == ours[21:]
    assert sorted(library[14:21]) == continuing


def test_ties_go_to_the_pair_of_smaller_ids_and_min_frequency_stops():
    words = {"cd": 2, "ab": 2, "ae": 1}
    base = ["[PAD]", "a", "b", "c", "d", "e", "##b", "##d", "##e"]
    assert learn_wordpiece_vocab(words, 10, special_tokens=["[PAD]"]) == base + ["ab"]
    assert learn_wordpiece_vocab(words, 20, special_tokens=["[PAD]"]) == base + ["ab", "cd"]
    assert learn_wordpiece_vocab(words, 20, special_tokens=["[PAD]"], min_frequency=1) == \
        base + ["ab", "cd", "ae"]
    # the characters are kept even past vocab_size: every training word stays encodable
    assert learn_wordpiece_vocab(words, 3, special_tokens=["[PAD]"]) == base
    assert learn_wordpiece_vocab({}, 10, special_tokens=["[PAD]", "[UNK]"]) == \
        ["[PAD]", "[UNK]"]

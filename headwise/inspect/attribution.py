"""Token attribution for one text, measured: integrated gradients with its completeness
error and the attention beside it (which explanation is faithful is measured by the
deletion curves of :mod:`headwise.inspect.faithfulness`; which heads attend to the deciding
tokens, by :mod:`headwise.inspect.head_attribution`).

**Networks** (the from-scratch Transformer, the BiLSTM, the imported pretrained encoders,
compound multi-label + slots models): integrated gradients over the token embeddings
(:mod:`headwise.inspect.integrated_gradients`: Captum, the baseline, the completeness
error each explanation reports beside the tolerance it is held to). The explained score
is an intent's raw logit (before the temperature, which only divides it).

**Long texts** are explained as the predictor that answered them read them (its long-text
policy, :func:`explain`): under ``"chunk_max"`` and ``"chunk_in_scope"`` (a single
network's default is one of them) the window whose answer was kept, under ``"chunk_span"``
the span read again whose answer was kept (else its window), under ``"truncate"``
the first window, under ``"head_tail"`` the one window of the text's head and tail, with
every token's character offsets in the whole text and the characters the window covers
(:attr:`Explanation.window`); so the explained intent is the answered one, and
completeness holds for the window explained.
A text answered from the mean of its windows (``"chunk"``) is refused
(:class:`LongTextNotExplained`).

**TF-IDF models** are linear in their features: a feature's contribution is its TF-IDF
value times its weight, spread evenly over the characters of its occurrences in the text
and summed per token (a CJK character, a run of letters and digits, or another character).
The baseline is the empty text (the intercept), so completeness holds to rounding.

**Deletion curves** (DeYoung et al. 2020's comprehensiveness, Samek et al. 2017's area
over the perturbation curve): remove a text's top-ranked tokens by a method (masked out of
the attention and the pooling, positions unchanged, as the leave-one-out check of
:mod:`~headwise.inspect.faithfulness`), follow the predicted intent's probability, and
average its drop over the removed fractions: the larger the area over the curve, the
more the method's top tokens carry the decision. Methods: ``ig`` (integrated gradients),
``rollout`` (:func:`~headwise.inspect.rollout.attention_rollout`), ``attention`` (the
last layer's head-averaged pooled row) and ``random``. Which one is the most faithful for
a model is measured by ``benchmarks/explain_faithfulness.py`` (the BENCHMARKS section
"Explanation faithfulness"), not assumed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise.attention import capture_attention
from headwise.inspect.forward import NoAttentionError, attention_layers, max_pool_mix, pooling_of
from headwise.inspect.integrated_gradients import (
    COMPLETENESS_TOLERANCE,
    SEGMENT_STEPS,
    baseline_ids,
    integrated_gradients,
    network_logits,
)
from headwise.inspect.rollout import rollout_matrix
from headwise.text.tokenizer import Tokenizer

__all__ = ["Attribution", "Explanation", "LongTextNotExplained", "TokenSpan", "explain",
           "first_window", "token_spans"]

#: (token, start, end, special): special tokens have no character span
TokenSpan = tuple[str, int | None, int | None, bool]


@dataclass(frozen=True)
class Attribution:
    """The attribution of one intent's score to the tokens of one text.

    Attributes:
        intent: the intent explained.
        index: its output index.
        scores: (tokens,) float64, one per token of :attr:`Explanation.tokens` (0 for
            special tokens).
        logit: the intent's raw logit on the text.
        baseline_logit: its logit at the baseline (the path's start; the intercept of a
            TF-IDF model).
        error: ``scores.sum() - (logit - baseline_logit)``: the completeness error.
        tolerance: what :attr:`error` is held to, relative to ``max(1, |delta|)``.
        steps: gradient evaluations of the integration (0 for a TF-IDF model's exact
            sum).
        method: ``"integrated_gradients"`` or ``"feature_weights"``.
    """

    intent: str
    index: int
    scores: np.ndarray
    logit: float
    baseline_logit: float
    error: float
    tolerance: float
    steps: int
    method: str

    @property
    def delta(self) -> float:
        """``logit - baseline_logit``: what the attributions should sum to."""
        return self.logit - self.baseline_logit

    @property
    def relative_error(self) -> float:
        """``|error| / max(1, |delta|)``."""
        return abs(self.error) / max(1.0, abs(self.delta))

    @property
    def within_tolerance(self) -> bool:
        """Whether completeness holds within :attr:`tolerance`."""
        return self.relative_error <= self.tolerance

    def completeness(self) -> dict[str, Any]:
        """The completeness check as a JSON-serialisable dict."""
        return {"intent": self.intent, "method": self.method,
                "sum": float(self.scores.sum()), "logit": self.logit,
                "baseline_logit": self.baseline_logit, "delta": self.delta,
                "error": self.error, "relative_error": self.relative_error,
                "tolerance": self.tolerance, "within_tolerance": self.within_tolerance,
                "steps": self.steps}


@dataclass(frozen=True)
class Explanation:
    """One text explained.

    Attributes:
        text: the text.
        tokens: ``[(token, start, end, special)]`` of the input explained, with character
            offsets in :attr:`text` (a long text's: the window that answered).
        logits: (intents,) float64 raw logits of the input explained (the text, or the
            window of a long one).
        labels: the intent names, index = output.
        attributions: one :class:`Attribution` per explained intent, the predicted
            (or chosen) intents first.
        attention: (layers, heads, n, n) float32 attention weights; None for a network
            without attention heads (BiLSTM) and a TF-IDF model.
        pooling: how the network pools (``"cls"``/``"mean"``/``"max"``; None without
            attention).
        truncated: whether the input explained leaves out part of the text (a text over
            the model's maximum length: see :attr:`window`).
        total_tokens: tokens of the whole text (special tokens included).
        window: ``(start, end)``, the characters of the text from the first to the last
            token of the input explained; None when it is the whole text.
        skipped: ``(start, end)``, the characters inside :attr:`window` that it does not
            read (the ``"head_tail"`` policy's middle), else None.
        long_text: the predictor's ``long_text`` note of the text (how it read a text over
            the maximum length, and under a one-window policy the window that answered, from
            1), None within the limit.
        tfidf_share: a blended compound model's share of each intent's probability that
            comes from its TF-IDF model (``levers.blend="tfidf"``): the attributions
            explain the network's logits only, not that share. 0 for every other model.
        pool_mix: a max-pooled network's (tokens,) share of the pooled dimensions each
            token supplies (:func:`~headwise.inspect.forward.max_pool_mix`), where its
            rollout starts; None for other poolings.
    """

    text: str
    tokens: list[TokenSpan]
    logits: np.ndarray
    labels: list[str]
    attributions: list[Attribution]
    attention: np.ndarray | None
    pooling: str | None
    truncated: bool
    total_tokens: int
    window: tuple[int, int] | None = None
    skipped: tuple[int, int] | None = None
    long_text: dict[str, Any] | None = None
    tfidf_share: float = 0.0
    pool_mix: np.ndarray | None = None

    @property
    def pooled_as(self) -> str | np.ndarray:
        """What attention rollout starts from: the example's mix for a max-pooled network,
        else the pooling's name (``"cls"`` without attention)."""
        return self.pool_mix if self.pool_mix is not None else (self.pooling or "cls")

    @property
    def special(self) -> np.ndarray:
        """(tokens,) bool: which tokens are special."""
        return np.array([t[3] for t in self.tokens], dtype=bool)

    def rollout(self) -> np.ndarray | None:
        """The (n, n) rollout matrix (:func:`~headwise.inspect.rollout.rollout_matrix`), or
        None without attention."""
        return None if self.attention is None else rollout_matrix(self.attention)


# -- tokens ----------------------------------------------------------------------------
def token_spans(tokenizer: Tokenizer, text: str, ids: Sequence[int],
                positions: Sequence[int] | None = None) -> list[TokenSpan]:
    """The tokens of ``ids`` (a window of the tokenizer's encoding of ``text``) with their
    character spans in ``text``; special tokens and the input prefix's tokens
    (:attr:`~headwise.text.tokenizer.Tokenizer.prefix_ids`) have none, and so has every
    token when the tokenizer's pieces do not line up with the ids.

    Args:
        tokenizer: the model's tokenizer.
        text: the whole text.
        ids: the window's token ids, special tokens included.
        positions: where the window's text tokens sit among the text's tokens without
            special tokens
            (:meth:`~headwise.intent.inference.bucketing.BucketedPredictor.window_tokens`);
            default the first ones (the text, or its truncation).
    """
    ids = list(ids)
    lead = int(bool(ids) and tokenizer.cls_token_id is not None
               and ids[0] == tokenizer.cls_token_id)
    prefix = tuple(tokenizer.prefix_ids)  # e5's "query: ", read like a special token
    if prefix and tuple(ids[lead:lead + len(prefix)]) == prefix:
        lead += len(prefix)
    tail = int(len(ids) > lead and tokenizer.sep_token_id is not None
               and ids[-1] == tokenizer.sep_token_id)
    body = ids[lead:len(ids) - tail]
    where = list(range(len(body))) if positions is None else list(positions)
    names, spans = tokenizer.tokenize(text), tokenizer.offsets(text)
    if len(where) == len(body) and all(0 <= i < min(len(names), len(spans)) for i in where):
        names, spans = [names[i] for i in where], [spans[i] for i in where]
    else:
        names, spans = [], []
    if len(names) != len(body) or len(spans) != len(body):
        names = [tokenizer.backend.id_to_token(i) or "" for i in body]
        spans = [(None, None)] * len(body)
    out: list[TokenSpan] = []
    out.extend((tokenizer.backend.id_to_token(i), None, None, True) for i in ids[:lead])
    out.extend((name, s, e, False) for name, (s, e) in zip(names, spans, strict=True))
    if tail:
        out.append((tokenizer.backend.id_to_token(ids[-1]), None, None, True))
    return out


def _network_explanation(model: nn.Module, tokenizer: Tokenizer, text: str,
                         window_ids: Sequence[int], positions: list[int], total: int,
                         labels: list[str], targets: list[int],
                         note: dict[str, Any] | None, steps: int, max_steps: int,
                         tolerance: float) -> Explanation:
    device = next(model.parameters()).device
    ids = torch.tensor([list(window_ids)], dtype=torch.long, device=device)
    mask = torch.ones_like(ids, dtype=torch.bool)
    try:
        layers = attention_layers(model)
    except NoAttentionError:
        layers = []
    with torch.no_grad():
        if layers:
            with capture_attention(layers, to_cpu=True) as cap:
                logits = network_logits(model, ids, mask)[0].double().cpu().numpy()
            attention = torch.stack([cap[m][0][0] for m in layers]).float().numpy()
        else:
            logits = network_logits(model, ids, mask)[0].double().cpu().numpy()
            attention = None
    found = integrated_gradients(model, ids, mask, targets,
                                 baseline_ids=baseline_ids(tokenizer, ids), steps=steps,
                                 max_steps=max_steps, tolerance=tolerance)
    attributions = [Attribution(labels[t], t, scores, logit, base, error, tolerance, n,
                                "integrated_gradients")
                    for t, (scores, logit, base, error, n) in zip(targets, found, strict=True)]
    tokens = token_spans(tokenizer, text, window_ids, positions)
    truncated = total > len(window_ids)
    window, skipped = _window(tokens, positions) if truncated else (None, None)
    pooling = pooling_of(model) if layers else None
    mix = max_pool_mix(model, ids, mask) if pooling == "max" else None
    return Explanation(text, tokens, logits, labels, attributions, attention, pooling,
                       truncated, total, window, skipped, note, pool_mix=mix)


def _window(tokens: list[TokenSpan], positions: list[int]
            ) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """The character span of a window's tokens and, where the window jumps over tokens of
    the text (head and tail), the characters it skips; None where the tokens have no
    spans."""
    real = [(s, e) for _, s, e, special in tokens if not special]
    if not real or any(s is None or e is None for s, e in real):
        return None, None
    skipped = None
    for k in range(len(positions) - 1):
        if positions[k + 1] != positions[k] + 1:
            skipped = (real[k][1], real[k + 1][0])
            break
    return (real[0][0], real[-1][1]), skipped


def _targets(labels: list[str], intents: Sequence[str]) -> list[int]:
    index = {name: i for i, name in enumerate(labels)}
    unknown = [x for x in intents if x not in index]
    if unknown:
        raise ValueError(f"unknown intents {unknown}; the model's intents: {labels}")
    return [index[x] for x in intents]


# -- TF-IDF ----------------------------------------------------------------------------
_TFIDF_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+|\S", re.UNICODE)


def _feature_positions(vectorizer: Any, text: str) -> dict[str, list[list[int]]]:
    """Each n-gram a fitted ``TfidfVectorizer`` reads in ``text``: the character positions
    of each of its occurrences (the analyzers of scikit-learn, with offsets kept)."""
    low = text.lower() if vectorizer.lowercase else text
    lo, hi = vectorizer.ngram_range
    found: dict[str, list[list[int]]] = {}
    if vectorizer.analyzer == "word":
        words = [(m.group(), m.start(), m.end())
                 for m in re.finditer(vectorizer.token_pattern, low)]
        for n in range(lo, hi + 1):
            for i in range(len(words) - n + 1):
                gram = words[i:i + n]
                key = " ".join(w for w, _, _ in gram)
                found.setdefault(key, []).append(
                    [p for _, s, e in gram for p in range(s, e)])
        return found
    if vectorizer.analyzer == "char":
        # scikit-learn collapses each run of white space to one space
        chars: list[tuple[str, int | None]] = []
        for m in re.finditer(r"\s\s+|.", low, re.DOTALL):
            chars.append((" ", m.start()) if m.group().isspace() else (m.group(), m.start()))
        grams = [chars]
    elif vectorizer.analyzer == "char_wb":
        grams = [[(" ", None)] + [(c, m.start() + k) for k, c in enumerate(m.group())]
                 + [(" ", None)] for m in re.finditer(r"\S+", low)]
    else:
        raise ValueError(f"no offsets for the analyzer {vectorizer.analyzer!r}")
    for seq in grams:
        for n in range(lo, hi + 1):
            starts = range(max(1, len(seq) - n + 1))
            for i in starts:
                piece = seq[i:i + n]
                found.setdefault("".join(c for c, _ in piece), []).append(
                    [p for _, p in piece if p is not None])
            if vectorizer.analyzer == "char_wb" and len(seq) <= n:
                break  # scikit-learn counts a word shorter than n once
    return found


def _tfidf_explanation(clf: Any, text: str, targets: list[int],
                       note: dict[str, Any] | None) -> Explanation:
    labels = list(clf.labels)
    logits = clf.logits([text])[0]
    x = clf.features([text]).tocsr()
    units = [(m.group(), m.start(), m.end()) for m in _TFIDF_TOKEN.finditer(text)]
    owner = np.full(len(text), -1)
    for u, (_, s, e) in enumerate(units):
        owner[s:e] = u
    per_char = np.zeros((len(targets), len(text)))
    offset = 0
    for vectorizer in clf.vectorizers:
        vocab = vectorizer.vocabulary_
        positions = _feature_positions(vectorizer, text)
        for gram, where in positions.items():
            column = vocab.get(gram)
            if column is None:
                continue
            value = x[0, offset + column]
            where = [w for w in where if w]
            if value == 0 or not where:
                continue
            share = value * clf.coef[targets, offset + column] / len(where)
            for occurrence in where:
                per_char[:, occurrence] += share[:, None] / len(occurrence)
        offset += len(vocab)
    attributions = []
    for row, t in enumerate(targets):
        scores = np.array([per_char[row, s:e].sum() for _, s, e in units])
        logit, base = float(logits[t]), float(clf.intercept[t])
        attributions.append(Attribution(labels[t], t, scores, logit, base,
                                        float(scores.sum() - (logit - base)),
                                        COMPLETENESS_TOLERANCE, 0, "feature_weights"))
    return Explanation(text, [(u, s, e, False) for u, s, e in units], logits, labels,
                       attributions, None, None, False, len(units), long_text=note)


# -- one entry -------------------------------------------------------------------------
class LongTextNotExplained(ValueError):
    """A long text answered from several windows pooled together (the ``"chunk"``
    long-text policy: the mean of their pooled vectors): no one window's attribution is
    what answered, so it is not explained."""


def explain(model: Any, text: str, *, answered: tuple[Any, Any] | None = None,
            intents: Sequence[str] | None = None, steps: int = SEGMENT_STEPS, max_steps: int = 1024,
            tolerance: float = COMPLETENESS_TOLERANCE) -> Explanation:
    """Explain one text's answer: token attributions with their completeness error, and
    the attention weights of a network that has heads.

    What is explained is what the predictor answered. A text within the model's maximum
    length is read whole. A longer one is explained as the predictor's long-text policy
    read it (:data:`~headwise.intent.inference.bucketing.LONG_TEXT_POLICIES`):
    ``"chunk_max"`` or ``"chunk_in_scope"`` (a single network's ``"auto"`` is its
    architecture's), the window whose answer was kept; ``"chunk_span"``, the span read
    again whose answer was kept (else its window);
    ``"truncate"``, the first window; ``"head_tail"``, its one window of the text's head and
    tail. The tokens keep their character offsets in the whole text, and the explanation
    says which characters the input explained covers (:attr:`Explanation.window`). A text
    the ``"chunk"`` policy answered from the mean of its windows is refused
    (:class:`LongTextNotExplained`), and ``"reject"`` refuses a long text as the predictor
    does.

    Args:
        model: the predictor whose answer is explained (``load_predictor``'s, which
            ``headwise predict`` and the service run, with their long-text policy), or a
            loaded classifier, explained as its own ``predict`` answers (its predictor on
            PyTorch, long-text policy ``"auto"``): an intent classifier (Transformer,
            pretrained encoder or BiLSTM), a compound classifier or a TF-IDF model.
        text: the text.
        answered: the predictor's encoding of ``text`` and its ``run`` row, when the answer
            was already computed (the service's): the window explained is then the one
            that answered; default: encoded and run here.
        intents: the intents to explain; default the answer's: a single-label model's
            answered intent (its most probable one when out of scope), a compound model's
            answered intents (its most probable one when none is).
        steps: Gauss-Legendre nodes per segment of the path (networks; the first try is
            the whole path with this many).
        max_steps: the most gradient evaluations (segments are halved while the
            completeness error is above ``tolerance``; a sharp turn of the network along
            the path, such as a layer norm of a nearly empty embedding, needs many).
        tolerance: the relative completeness error aimed at.

    Returns:
        An :class:`Explanation`.

    Raises:
        ValueError: a kind that cannot be explained (the kind registry's reason), an
            unknown intent, a long text under ``"reject"``
            (:class:`~headwise.intent.inference.bucketing.LongTextError`) or answered by
            ``"chunk"`` (:class:`LongTextNotExplained`).
    """
    from headwise.intent.inference import Predictor
    from headwise.intent.kinds import kind_of_classifier

    classifier = model.classifier if isinstance(model, Predictor) else model
    kind_of_classifier(classifier).require("explain", f"this {type(classifier).__name__}")
    predictor = model if isinstance(model, Predictor) else _own_predictor(classifier)
    if answered is None:
        [item] = predictor.encode([text])
        [row] = predictor.run([item])
    else:
        item, row = answered
    note = predictor.note(item, row)
    labels = list(predictor.labels)
    if intents is None:
        [answer] = predictor.answers([text], [item], [row], top_k=len(labels))
        intents = [name for name, _ in answer.intents] or [answer.top_k[0][0]]
    targets = _targets(labels, intents)
    if hasattr(classifier, "vectorizers") and hasattr(classifier, "coef"):
        return _tfidf_explanation(classifier, text, targets, note)
    chunk = None if note is None else note.get("chunk")
    if note is not None and note["policy"] == "chunked" and chunk is None:
        raise LongTextNotExplained(
            f"the text has {note['tokens']} tokens, over the model's maximum length of "
            f"{note['max_length']}, and the {predictor.long_text!r} long-text policy answered "
            f"it from the {note['pooling']} of its {note['chunks']} windows' pooled vectors: "
            f"no one window's attribution is what answered. Explain it under auto, chunk_max, "
            f"chunk_in_scope or chunk_span (which keep one window's answer), head_tail or "
            f"truncate")
    ids, positions = predictor.answered_window(item, note)
    explanation = _network_explanation(classifier.model, classifier.tokenizer, text, ids,
                                       positions, item.tokens, labels, targets, note, steps,
                                       max_steps, tolerance)
    return dataclasses.replace(explanation,
                               tfidf_share=float(getattr(classifier, "tfidf_share", 0.0)))


def _own_predictor(classifier: Any) -> Any:
    """The predictor a classifier's own ``predict`` runs: a network's on PyTorch (long-text
    policy ``"auto"``), else the one ``load_predictor`` gives it."""
    if hasattr(classifier, "predictor"):
        return classifier.predictor()
    from headwise.intent.inference import load_predictor

    return load_predictor(classifier, runtime="torch")


def first_window(classifier: Any) -> Any:
    """A classifier's predictor on PyTorch that reads a long text's first window only
    (``"truncate"``): what the head analysis's and the deletion curves' token sequences
    are (:func:`~headwise.inspect.words.segment`), so their explanations read the same."""
    from headwise.intent.inference import load_predictor

    return load_predictor(classifier, runtime="torch", long_text="truncate")

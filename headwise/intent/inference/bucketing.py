"""What every network's predictor shares: texts -> token windows -> length-bucketed batches.

:class:`BucketedPredictor` tokenizes texts once, applies the long-text policy (truncate,
keep the head and the tail, split into overlapping windows, or refuse), groups rows into
forward passes by length bucket and pads each group. The predictors of the two network
kinds build on it:
:class:`~headwise.intent.inference.single.SingleLabelPredictor` (single-label intents) and
:class:`~headwise.intent.inference.compound.CompoundPredictor` (several intents plus
slots). Each defines :meth:`~headwise.intent.inference.predictor.Predictor.run`, the call
the service's micro-batcher makes on a gathered batch and the library makes on its texts.

Padding never changes an answer: rows of one batch are independent under the padding
mask. Batches are bucketed by length (the longest row at most doubles the shortest one's
bucket), so a short text never pays for a long neighbour.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headwise.intent.inference.predictor import Predictor
from headwise.intent.inference.runtime import OnnxRuntime, TorchRuntime
from headwise.models.chunked import chunk_spans
from headwise.text.sentences import sentence_spans
from headwise.text.tokenizer import Tokenizer

__all__ = ["CHUNK_POOLING", "DEFAULT_CHUNK_LENGTH", "DEFAULT_CHUNK_STRIDE", "DEFAULT_LONG_TEXT",
           "LONG_TEXT_POLICIES", "MIN_BUCKET", "MIN_CHUNK_LENGTH", "ONE_WINDOW_POLICIES",
           "SENTENCE_STRIDE", "SPAN_MARGIN", "UNRECORDED_LONG_TEXT", "BucketedPredictor",
           "EncodedText", "LongTextError", "architecture_of", "check_chunk_length",
           "check_windowed", "default_chunk_stride", "default_long_text", "length_bucket",
           "long_text_note", "window_length"]

#: what a predictor does with a text over the model's maximum length: ``"auto"`` (a single
#: network: its architecture's :data:`DEFAULT_LONG_TEXT`; a compound model, a TF-IDF model
#: or an ensemble:
#: ``"truncate"``), ``"truncate"`` (the first window only), ``"head_tail"`` (its first and
#: last halves of a window), ``"chunk"`` (overlapping windows, their pooled vectors
#: averaged before the head), ``"chunk_max"`` (overlapping windows, each answered; the
#: most confident in-scope window's answer is the text's, out of scope only when every
#: window is), ``"chunk_in_scope"`` (overlapping windows, each answered; the answer of the
#: window the model's out-of-scope score finds most in scope is the text's, out of scope
#: only when every window is), ``"chunk_span"`` (overlapping windows locate the request:
#: the run of windows the out-of-scope rule keeps around the ``chunk_max`` window, widened
#: by :data:`SPAN_MARGIN` tokens, is read again as one window, whose answer is the text's
#: unless the rule rejects it), ``"reject"`` (refused)
LONG_TEXT_POLICIES = ("auto", "truncate", "head_tail", "chunk", "chunk_max", "chunk_in_scope",
                      "chunk_span", "reject")

#: the policy ``"auto"`` gives a single network, per architecture of the model (its
#: training recipe's ``architecture.type``: :func:`architecture_of`, :func:`default_long_text`).
#: Each measured entry is the policy chosen, with windows of :data:`DEFAULT_CHUNK_LENGTH`, on
#: that architecture's own validation rows of the long-message slice (BENCHMARKS.md, "Long
#: messages"; ``benchmarks/long_text.py``): for the from-scratch Transformer and the
#: pretrained encoder alike, narrow windows locate the request and the span of in-scope
#: windows around it is read again (``"chunk_span"``: a narrow window alone cuts a request
#: in two). The BiLSTM, not measured there, takes the from-scratch Transformer's (the other
#: network trained from scratch, with the same out-of-scope training).
DEFAULT_LONG_TEXT: dict[str, str] = {"transformer": "chunk_span", "bilstm": "chunk_span",
                                     "pretrained": "chunk_span"}
#: the policy ``"auto"`` gives a network that records no training recipe (built in code, not
#: by ``headwise train``): the one that reads nothing of the model but its answers and asks
#: nothing of its out-of-scope rule (``"chunk_span"`` needs a rule that rejects chatter, or
#: its span grows into the chatter)
UNRECORDED_LONG_TEXT = "chunk_max"

#: the policies that read several windows of a text, and how each pools them: ``"mean"``
#: (the windows' pooled vectors averaged before the head), ``"max_confidence"`` (the
#: answer of the in-scope window of highest top probability), ``"max_in_scope"`` (the
#: answer of the window of highest out-of-scope score: the saved detector's, else the top
#: probability), ``"in_scope_span"`` (the answer of the span of in-scope windows around the
#: ``"max_confidence"`` window, read again as one window)
CHUNK_POOLING = {"chunk": "mean", "chunk_max": "max_confidence",
                 "chunk_in_scope": "max_in_scope", "chunk_span": "in_scope_span"}
#: the chunked policies under which one window's answer is the text's (the ``long_text``
#: note names it; an explanation explains that window, or under ``"chunk_span"`` the span
#: it located and read again)
ONE_WINDOW_POLICIES = tuple(p for p, pooling in CHUNK_POOLING.items() if pooling != "mean")

#: the width of a chunked policy's windows when none is given: a fraction of the model's
#: maximum length (see :func:`window_length`); chosen with the policy on validation rows of
#: the long-message slice (BENCHMARKS.md, "Long messages"; ``benchmarks/long_text.py``)
DEFAULT_CHUNK_LENGTH = 0.25

#: ``chunk_stride``'s value for windows that follow the text's sentences
#: (:func:`~headwise.text.sentences.sentence_spans`): a window starts at every sentence and
#: takes the whole sentences after it that fit its width; a sentence wider than a window is
#: cut into windows half a window's body apart
SENTENCE_STRIDE = "sentence"

#: the stride ``"auto"`` gives the windows of a single network's
#: :data:`DEFAULT_LONG_TEXT` policy, per architecture (:func:`default_chunk_stride`; a
#: policy named explicitly, or a model that records no training recipe: windows half a
#: body apart). Chosen with the policy and the width on each architecture's own validation
#: rows of the long-message slice (BENCHMARKS.md, "Long messages";
#: ``benchmarks/long_text.py``): for the from-scratch Transformer, windows that follow the
#: text's sentences (the run of in-scope windows ``"chunk_span"`` reads again then starts
#: and ends at a sentence's edge instead of inside the chatter beside the request); for
#: the pretrained encoder, counted windows half a body apart (None), which its validation
#: rows preferred there by a small margin. The BiLSTM, not measured there, takes the
#: from-scratch Transformer's, as for the policy.
DEFAULT_CHUNK_STRIDE: dict[str, int | str | None] = {
    "transformer": SENTENCE_STRIDE, "bilstm": SENTENCE_STRIDE, "pretrained": None}

#: tokens ``"chunk_span"`` adds on each side of the run of in-scope windows it reads again:
#: a window that holds the request's first or last tokens beside chatter is often rejected,
#: so the run alone can miss them (chosen on validation rows of the long-message slice,
#: BENCHMARKS.md "Long messages")
SPAN_MARGIN = 2

#: the narrowest window (tokens, special tokens included) a chunked policy may read when it
#: is narrower than the model's maximum length
MIN_CHUNK_LENGTH = 8

#: smallest length bucket (tokens); buckets are powers of two from here
MIN_BUCKET = 8


def architecture_of(classifier: Any) -> str | None:
    """The architecture a classifier was trained as: its saved training recipe's
    ``architecture.type`` (``"transformer"``, ``"bilstm"``, ``"pretrained"``), None for one
    that records no recipe."""
    recipe = (getattr(classifier, "info", None) or {}).get("recipe")
    part = recipe.get("architecture") if isinstance(recipe, dict) else None
    name = part.get("type") if isinstance(part, dict) else None
    return str(name) if name else None


def default_long_text(architecture: str | None) -> str:
    """The policy ``"auto"`` gives a single network of ``architecture``
    (:data:`DEFAULT_LONG_TEXT`; None, or one with no entry: :data:`UNRECORDED_LONG_TEXT`)."""
    return DEFAULT_LONG_TEXT.get(architecture or "", UNRECORDED_LONG_TEXT)


def default_chunk_stride(architecture: str | None) -> int | str | None:
    """The windows' stride ``"auto"`` gives a single network of ``architecture`` with its
    :func:`default_long_text` policy (:data:`DEFAULT_CHUNK_STRIDE`; None, or one with no
    entry: None, windows half a body apart)."""
    return DEFAULT_CHUNK_STRIDE.get(architecture or "")


class LongTextError(ValueError):
    """A text over the maximum length under the ``"reject"`` policy."""


@dataclass(frozen=True)
class EncodedText:
    """One text as the windows the model reads.

    Attributes:
        chunks: token ids of each window, special tokens included (one window unless
            chunked).
        tokens: tokens of the whole text, special tokens included.
        policy: None (within the limit), ``"truncated"``, ``"head_tail"`` or
            ``"chunked"``.
        starts: under ``"chunked"`` windows that follow sentences, where each window's
            text tokens start among the text's tokens without special tokens (``()``
            otherwise: windows cut by count start ``token_stride`` tokens apart).
    """

    chunks: tuple[tuple[int, ...], ...]
    tokens: int
    policy: str | None = None
    starts: tuple[int, ...] = ()


def check_chunk_length(chunk_length: object) -> float | int:
    """A chunked policy's window width as given, checked without the model: a float in
    (0, 1], a fraction of the model's maximum length, or an int >= :data:`MIN_CHUNK_LENGTH`,
    a count of tokens (special tokens included). :func:`window_length` resolves it
    against a model's maximum length.

    Raises:
        ValueError: anything else (a bool, a float outside (0, 1], an int below
            :data:`MIN_CHUNK_LENGTH`), saying what is taken.
    """
    if isinstance(chunk_length, float) and 0.0 < chunk_length <= 1.0:
        return chunk_length
    if isinstance(chunk_length, int) and not isinstance(chunk_length, bool) \
            and chunk_length >= MIN_CHUNK_LENGTH:
        return chunk_length
    raise ValueError(f"chunk_length must be a fraction of the model's maximum length (a "
                     f"float in (0, 1], e.g. 0.5) or a window width in tokens (an int >= "
                     f"{MIN_CHUNK_LENGTH}, special tokens included), got {chunk_length!r}")


def check_windowed(long_text: str, chunk_length: object, chunk_stride: object = None) -> None:
    """Refuse a window width (``chunk_length`` not None) or a window stride
    (``chunk_stride`` not None) given with a policy that does not cut a text into windows
    (one not in :data:`CHUNK_POOLING`; resolve ``"auto"`` first).

    Raises:
        ValueError: naming the option, the policy and the policies that take it.
    """
    if long_text in CHUNK_POOLING:
        return
    for name, value, what in (("chunk_length", chunk_length, "width"),
                              ("chunk_stride", chunk_stride, "stride")):
        if value is not None:
            raise ValueError(f"{name} {value!r} is the {what} of a chunked policy's windows "
                             f"({', '.join(CHUNK_POOLING)}); the {long_text} policy does "
                             f"not cut a text into windows")


def window_length(chunk_length: float | int | None, max_length: int) -> int:
    """The width in tokens (special tokens included) of a chunked policy's windows.

    Args:
        chunk_length: a float in (0, 1]: that fraction of ``max_length``, rounded down; an
            int: that many tokens (see :func:`check_chunk_length`); None:
            :data:`DEFAULT_CHUNK_LENGTH`, brought within ``[MIN_CHUNK_LENGTH, max_length]``
            instead of refused (the default fits every model).
        max_length: the model's maximum length in tokens.

    Returns:
        The width, between :data:`MIN_CHUNK_LENGTH` and ``max_length`` (``max_length``
        itself whatever it is: a window of the whole maximum length is always taken).

    Raises:
        ValueError: a value :func:`check_chunk_length` refuses, a width over
            ``max_length``, or one under :data:`MIN_CHUNK_LENGTH` (naming the fraction's
            width).
    """
    given = check_chunk_length(DEFAULT_CHUNK_LENGTH if chunk_length is None else chunk_length)
    # a fraction's width rounded down (the epsilon keeps 0.29 * 100 from reading 28.99...)
    tokens = int(given * max_length + 1e-9) if isinstance(given, float) else given
    if chunk_length is None:
        return min(max_length, max(MIN_CHUNK_LENGTH, tokens))
    if tokens > max_length:
        raise ValueError(f"chunk_length {given}: a window of {tokens} tokens is wider than "
                         f"the model's maximum length of {max_length}")
    if tokens < MIN_CHUNK_LENGTH and tokens != max_length:
        raise ValueError(f"chunk_length {given}: {given} of the model's maximum length of "
                         f"{max_length} is a window of {tokens} tokens, under the "
                         f"{MIN_CHUNK_LENGTH} a window needs")
    return tokens


def long_text_note(policy: str | None, tokens: int, max_length: int, chunks: int, *,
                   pooling: str | None = None, chunk: int | None = None,
                   window: int | None = None, stride: int | str | None = None,
                   span: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """A response's ``long_text`` record: None for a text within the limit (``policy``
    None), else how it was handled (``"truncated"``, ``"head_tail"`` or ``"chunked"``),
    its token count, the limit, the windows read, the width of each window in tokens
    (special tokens included; ``window``, default ``max_length``: narrower only when a
    chunked policy reads shorter windows, see :func:`window_length`), where chunked windows
    start (``stride``: tokens between window starts, or :data:`SENTENCE_STRIDE` when they
    follow the text's sentences; else None), how chunked windows
    were pooled (a value of :data:`CHUNK_POOLING`, else None), when one window answers
    (:data:`ONE_WINDOW_POLICIES`) that window (from 1, else None) and, under
    ``"chunk_span"``, the span read again whose answer is the text's: ``[start, end)``
    among the text's tokens without special tokens (None when none was: the window
    ``chunk`` answered)."""
    if policy is None:
        return None
    return {"policy": policy, "tokens": tokens, "max_length": max_length, "chunks": chunks,
            "window": max_length if window is None else window, "stride": stride,
            "pooling": pooling,
            "chunk": chunk, "span": None if span is None else [int(span[0]), int(span[1])]}


def length_bucket(n: int) -> int:
    """The bucket of a row of ``n`` tokens: the smallest power of two >= n (>= 8)."""
    return max(MIN_BUCKET, 1 << max(0, n - 1).bit_length())


class BucketedPredictor(Predictor):
    """Tokenize, apply the long-text policy, bucket and pad: the part of inference that
    does not depend on what the model answers.

    Args:
        tokenizer: the model's tokenizer.
        runtime: a :class:`TorchRuntime` or :class:`OnnxRuntime` of the model.
        max_length: the model's longest input in tokens, special tokens included.
        long_text: one of :data:`LONG_TEXT_POLICIES` but ``"auto"`` (which the kinds'
            predictors resolve).
        chunk_length: the width of a chunked policy's windows (:data:`CHUNK_POOLING`): a
            float in (0, 1], a fraction of ``max_length``, or an int, a count of tokens
            (:func:`window_length`); None: :data:`DEFAULT_CHUNK_LENGTH`, widened where an
            input prefix would leave it fewer text tokens than the narrowest window of a
            model without one (``MIN_CHUNK_LENGTH - 2``). A text within
            ``max_length`` is still read whole; only a longer one is cut into windows this
            wide. Refused with any other policy.
        chunk_stride: tokens between window starts (default half a window's body), or
            :data:`SENTENCE_STRIDE` (windows that start at the text's sentences and end at
            one); refused with a policy that does not chunk.
        max_rows: most rows in one forward pass (a gathered batch is split beyond it).

    Raises:
        ValueError: an unknown policy, a window width :func:`window_length` refuses or one
            given with a policy that does not chunk, a stride too large for the window, or
            ``max_rows < 1``.
    """

    def __init__(self, tokenizer: Tokenizer, runtime: TorchRuntime | OnnxRuntime, *,
                 max_length: int, long_text: str = "truncate",
                 chunk_length: float | int | None = None, chunk_stride: int | str | None = None,
                 max_rows: int = 64) -> None:
        if long_text not in LONG_TEXT_POLICIES or long_text == "auto":
            raise ValueError(f"long_text must be one of "
                             f"{', '.join(p for p in LONG_TEXT_POLICIES if p != 'auto')}, "
                             f"got {long_text!r}")
        check_windowed(long_text, chunk_length, chunk_stride)
        self.tokenizer = tokenizer
        self.runtime = runtime
        self.long_text = long_text
        self.chunk_length = chunk_length  # as given (None: the default)
        self.max_length = int(max_length)
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_token_id, \
            tokenizer.sep_token_id, tokenizer.pad_token_id
        #: what every window starts with (``cls`` and the input prefix's tokens, e5's
        #: ``"query: "``) and ends with (``sep``): each window is read as a whole text is
        self.lead = ((self.cls_id,) if self.cls_id is not None else ()) + \
            tuple(tokenizer.prefix_ids)
        self.trail = (self.sep_id,) if self.sep_id is not None else ()
        specials = len(self.lead) + len(self.trail)
        self.body = self.max_length - specials
        #: the chunked windows' width in tokens, special tokens included, and their body
        self.window = window_length(chunk_length, self.max_length)
        if chunk_length is None:  # the default fits every model: a long input prefix too
            self.window = min(self.max_length,
                              max(self.window, specials + MIN_CHUNK_LENGTH - 2))
        self.window_body = body = self.window - specials
        if body < 1:
            raise ValueError(f"a window of {self.window} tokens leaves no room for text beside "
                             f"its {specials} special and prefix tokens; give a wider "
                             f"chunk_length")
        #: as given (an int, or :data:`SENTENCE_STRIDE`), or the default: half a body
        self.chunk_stride: int | str = max(1, body // 2) if chunk_stride is None \
            else chunk_stride
        #: tokens between the starts of windows cut by count (under
        #: :data:`SENTENCE_STRIDE`, inside a sentence wider than a window)
        self.token_stride = self.chunk_stride if isinstance(self.chunk_stride, int) \
            else max(1, body // 2)
        if isinstance(self.chunk_stride, str):
            if self.chunk_stride != SENTENCE_STRIDE:
                raise ValueError(f"chunk_stride must be a number of tokens or "
                                 f"{SENTENCE_STRIDE!r}, got {self.chunk_stride!r}")
        elif isinstance(self.chunk_stride, bool) or not isinstance(self.chunk_stride, int) \
                or not 1 <= self.chunk_stride <= body:
            raise ValueError(f"chunk_stride must be in [1, {body}] (a window of "
                             f"{self.window} tokens) or {SENTENCE_STRIDE!r}, got "
                             f"{self.chunk_stride!r}")
        if max_rows < 1:
            raise ValueError(f"batch_size (rows in one forward pass) must be at least 1, got "
                             f"{max_rows}")
        self.max_rows = max_rows

    # -- texts -> windows ----------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> list[EncodedText]:
        """Tokenize texts and apply the long-text policy.

        Args:
            texts: the texts.

        Returns:
            One :class:`EncodedText` per text.

        Raises:
            LongTextError: a text over the maximum length under ``"reject"`` (the message
                names its index and length).
        """
        tok = self.tokenizer
        full = tok(list(texts), max_length=None)
        lengths = full["attention_mask"].sum(1).tolist()
        rows = full["input_ids"].tolist()
        out = []
        for i, (text, row, n) in enumerate(zip(texts, rows, lengths, strict=True)):
            row = row[:n]
            if n <= self.max_length:
                out.append(EncodedText((tuple(row),), n))
            elif self.long_text == "reject":
                raise LongTextError(f"texts[{i}] has {n} tokens, over the model's maximum "
                                    f"length of {self.max_length}")
            elif self.long_text == "truncate":
                ids = tok([text], max_length=self.max_length)["input_ids"][0].tolist()
                out.append(EncodedText((tuple(ids),), n, "truncated"))
            elif self.long_text == "head_tail":
                out.append(EncodedText((self._head_tail(row),), n, "head_tail"))
            else:
                body = self._body(row)
                spans = self._window_spans(text, len(body))
                starts = tuple(a for a, _ in spans) if self.chunk_stride == SENTENCE_STRIDE \
                    else ()
                out.append(EncodedText(tuple((*self.lead, *body[a:b], *self.trail)
                                             for a, b in spans), n, "chunked", starts))
        return out

    def encode_truncated(self, texts: Sequence[str]) -> list[EncodedText]:
        """Texts cut to the maximum length whatever the policy (for a warm-up)."""
        batch = self.tokenizer(list(texts), max_length=self.max_length)
        lengths = batch["attention_mask"].sum(1).tolist()
        rows = batch["input_ids"].tolist()
        return [EncodedText((tuple(r[:n]),), n) for r, n in zip(rows, lengths, strict=True)]

    def _body(self, row: list[int]) -> list[int]:
        """A tokenized text without its special and prefix tokens (:attr:`lead`,
        :attr:`trail`)."""
        lead, trail = len(self.lead), len(self.trail)
        body = row
        if lead and tuple(body[:lead]) == self.lead:
            body = body[lead:]
        if trail and tuple(body[-trail:]) == self.trail:
            body = body[:-trail]
        return body

    def _head_tail(self, row: list[int]) -> tuple[int, ...]:
        """One window of a long text: its first ``body // 2`` tokens and its last
        ``body - body // 2``, between the special and prefix tokens."""
        body = self._body(row)
        head = self.body // 2
        kept = body[:head] + body[len(body) - (self.body - head):]
        return (*self.lead, *kept, *self.trail)

    def _token_spans(self, start: int, end: int) -> list[tuple[int, int]]:
        """Windows of the text tokens ``[start, end)`` cut by count: ``window_body`` wide,
        :attr:`token_stride` apart, the last one reaching ``end``
        (:func:`~headwise.models.chunked.chunk_spans`)."""
        return [(start + a, start + b)
                for a, b in chunk_spans(end - start, self.window_body, self.token_stride)]

    def _window_spans(self, text: str, n: int) -> list[tuple[int, int]]:
        """The ``(start, end)`` text-token positions of each window of a text of ``n``
        text tokens: cut by count, or under :data:`SENTENCE_STRIDE` at its sentences (by
        count where its tokens' offsets do not line up with them)."""
        if self.chunk_stride != SENTENCE_STRIDE:
            return self._token_spans(0, n)
        offsets = self.tokenizer.offsets(text)
        if len(offsets) != n:
            return self._token_spans(0, n)
        firsts = [s for s, _ in sentence_spans(text)]
        # each sentence's tokens: a token belongs to the sentence its first character is in
        bounds: list[list[int]] = []
        for i, (start, _) in enumerate(offsets):
            k = bisect_right(firsts, start) - 1
            if bounds and bounds[-1][0] == k:
                bounds[-1][2] = i + 1
            else:
                bounds.append([k, i, i + 1])
        sentences = [(a, b) for _, a, b in bounds]
        out: list[tuple[int, int]] = []
        for k, (a, b) in enumerate(sentences):
            if b - a > self.window_body:
                out += self._token_spans(a, b)
                continue
            end = b
            for _, b2 in sentences[k + 1:]:
                if b2 - a > self.window_body:
                    break
                end = b2
            out.append((a, end))
        return out or self._token_spans(0, n)

    def window_tokens(self, item: EncodedText, window: int = 0) -> list[int]:
        """Where the text tokens of one window of an encoded text sit in the whole text:
        their positions among the text's tokens without special tokens, in window order
        (``"head_tail"``: the head's, then the tail's). An explanation maps them to
        character offsets of the text (:func:`headwise.inspect.explain`).

        Args:
            item: a text's encoding (:meth:`encode`).
            window: the window's index (from 0; a chunked text's windows start
                ``chunk_stride`` tokens apart).

        Raises:
            IndexError: a window the encoding does not have.
        """
        if not 0 <= window < len(item.chunks):
            raise IndexError(f"window {window} of a text read as {len(item.chunks)} "
                             f"window(s)")
        chunk = item.chunks[window]
        lead = len(self.lead) if tuple(chunk[:len(self.lead)]) == self.lead else 0
        tail = len(self.trail) if len(chunk) > lead and self.trail \
            and tuple(chunk[-len(self.trail):]) == self.trail else 0
        size = len(chunk) - lead - tail
        if item.policy == "head_tail":
            total = item.tokens - lead - tail
            head = self.body // 2
            return [*range(head), *range(total - (size - head), total)]
        start = 0 if item.policy != "chunked" else \
            item.starts[window] if item.starts else window * self.token_stride
        return list(range(start, start + size))

    def text_tokens(self, item: EncodedText) -> list[int]:
        """The token ids of a chunked text without its special tokens, put back together
        from its windows (each window's body where :meth:`window_tokens` places it)."""
        ids: dict[int, int] = {}
        for w, chunk in enumerate(item.chunks):
            positions = self.window_tokens(item, w)
            lead = len(self.lead) if tuple(chunk[:len(self.lead)]) == self.lead else 0
            for p, t in zip(positions, chunk[lead:lead + len(positions)], strict=True):
                ids[p] = t
        return [ids[p] for p in range(len(ids))]

    def span_window(self, item: EncodedText, start: int, end: int
                    ) -> tuple[tuple[int, ...], list[int]]:
        """One window of a chunked text's tokens ``[start, end)`` (positions without special
        tokens, at most the maximum length's body): its token ids with the special and
        prefix tokens, and the positions of its text tokens (:meth:`window_tokens`'s
        form), as ``"chunk_span"`` reads and an explanation explains it.

        Raises:
            ValueError: an empty span, one outside the text or wider than the body.
        """
        body = self.text_tokens(item)
        if not 0 <= start < end <= len(body) or end - start > self.body:
            raise ValueError(f"span [{start}, {end}) of a text of {len(body)} tokens (at most "
                             f"{self.body} in one window)")
        return (*self.lead, *body[start:end], *self.trail), list(range(start, end))

    def answered_window(self, item: EncodedText, note: dict[str, Any] | None
                        ) -> tuple[tuple[int, ...], list[int]]:
        """What answered an encoded text, as one window: its token ids (special tokens
        included) and the positions of its text tokens (:meth:`window_tokens`'s form),
        read from the text's ``long_text`` note (:meth:`note`): the span read again
        (``span``, :meth:`span_window`), else the window that answered (``chunk``), else
        the first (a text read whole, truncated, or its head and tail)."""
        if note is not None and note.get("span"):
            return self.span_window(item, *note["span"])
        index = 0 if note is None or note.get("chunk") is None else int(note["chunk"]) - 1
        return item.chunks[index], self.window_tokens(item, index)

    # -- windows -> padded batches -------------------------------------------------------
    def buckets(self, rows: Sequence[Sequence[int]]) -> list[list[int]]:
        """Row indices grouped into forward passes: by length bucket, at most
        ``max_rows`` each, shortest first."""
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        groups: list[list[int]] = []
        for i in order:
            if (groups and len(groups[-1]) < self.max_rows
                    and length_bucket(len(rows[groups[-1][0]])) == length_bucket(len(rows[i]))):
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups

    def padded_batches(self, rows: Sequence[Sequence[int]]
                       ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """The forward passes of ``rows``, padded to their longest row.

        Args:
            rows: token ids of each row.

        Returns:
            An iterator of ``(group, input_ids, attention_mask)``: the row indices of one
            pass (see :meth:`buckets`) and their (len(group), width) int64 arrays.
        """
        for group in self.buckets(rows):
            width = max(len(rows[i]) for i in group)
            ids = np.full((len(group), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.int64)
            for r, i in enumerate(group):
                ids[r, :len(rows[i])] = rows[i]
                mask[r, :len(rows[i])] = 1
            yield group, ids, mask

    def note(self, item: EncodedText, row: Any = None) -> dict[str, Any] | None:
        """The response's ``long_text`` record of an encoded text (None within the limit);
        ``row`` (its :meth:`run` row) is not read here."""
        chunked = item.policy == "chunked"
        return long_text_note(item.policy, item.tokens, self.max_length, len(item.chunks),
                              pooling=CHUNK_POOLING.get(self.long_text) if chunked else None,
                              window=self.window if chunked else None,
                              stride=self.chunk_stride if chunked else None)

    def warm_up(self, texts: Sequence[str]) -> None:
        """Run texts (truncated, whatever the policy) through the runtime once, so the
        first real request does not pay for lazy initialisation."""
        self.run(self.encode_truncated(texts))

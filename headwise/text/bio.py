"""BIO tags over sub-word tokens: slot spans to one tag per token, and back.

A slot filler is trained as token classification: each token of the model's input gets a
tag ``O`` (outside any slot), ``B-x`` (the first token of a slot ``x``) or ``I-x`` (a later
token of it)::

    names = bio_tag_names(["amount", "date"])      # ["O", "B-amount", "I-amount", ...]
    index = {tag: i for i, tag in enumerate(names)}
    offsets = token_offsets(tok, [text])[0]        # aligned with tok([text])["input_ids"][0]
    tags = spans_to_tags(offsets, example.slots, index)
    spans = tags_to_spans(predicted, offsets, text, names)

Offsets are character spans ``(start, end)`` of each token in the original text. Positions
with an empty span, the ``[CLS]``/``[SEP]`` (and padding) positions, get
:data:`IGNORE_INDEX` (-100, what ``torch.nn.functional.cross_entropy`` skips).

Alignment: a token belongs to span ``x`` when its characters overlap ``x``'s. When a span
boundary falls inside a token (``1,200`` inside the WordPiece word ``£1``), the whole token
is tagged, so decoding gives the span grown to whole tokens (``£1,200``); when a token
overlaps two spans it goes to the first, and a span left with no token of its own is lost.
So ``tags_to_spans(spans_to_tags(...))`` gives the spans back exactly (values aside) when
every boundary falls on a token boundary. Spans that truncation cut off lose their tokens
past ``max_length``.

A tag per token cannot say where inside a token a span ends: a sentencepiece vocabulary
has ``元的`` and ``的三`` as one token each, so the amount ``四万六千元`` in
``那笔四万六千元的消费`` decodes as ``四万六千元的``. Given ``fits`` (whether a span's
text is a value of its slot), :func:`tags_to_spans` cuts a span that does not fit inside
its first and last token, the only places where the boundary can lie, and keeps the
longest cut that fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from headwise.text.dataset import SlotSpan
from headwise.text.tokenizer import Tokenizer

#: the tag of positions a loss ignores (special tokens, padding)
IGNORE_INDEX = -100
OUTSIDE = "O"


def bio_tag_names(slot_names: Sequence[str]) -> list[str]:
    """The tags of a slot set: ``["O", "B-x", "I-x", "B-y", "I-y", ...]`` in slot order.

    Args:
        slot_names: the slots (for instance :meth:`Dataset.slot_names
            <headwise.text.dataset.Dataset.slot_names>`).

    Returns:
        The tag names; tag id = position.

    Raises:
        ValueError: a repeated or empty slot name.
    """
    if isinstance(slot_names, str):
        raise TypeError("slot_names must be a sequence of names, not one string")
    if len(set(slot_names)) != len(slot_names):
        raise ValueError(f"slot names repeat: {list(slot_names)}")
    if any(not isinstance(n, str) or not n for n in slot_names):
        raise ValueError(f"slot names must be non-empty strings: {list(slot_names)}")
    return [OUTSIDE] + [f"{p}-{n}" for n in slot_names for p in ("B", "I")]


def spans_to_tags(offsets: Sequence[tuple[int, int]], spans: Sequence[SlotSpan],
                  tag_index: dict[str, int]) -> list[int]:
    """One BIO tag id per token.

    Args:
        offsets: ``(start, end)`` per token (from :func:`token_offsets`, or
            :meth:`Tokenizer.offsets <headwise.text.tokenizer.Tokenizer.offsets>` for the
            tokens without the special ones).
        spans: the slot spans of the text (not overlapping, as
            :func:`~headwise.text.annotations.read_annotated` guarantees).
        tag_index: tag name -> id, holding ``"O"`` and ``B-``/``I-`` of every span's name.

    Returns:
        The tag ids: :data:`IGNORE_INDEX` for a token with an empty span, ``B-x`` for the
        first token overlapping span ``x``, ``I-x`` for the later ones, else ``O``.

    Raises:
        ValueError: a span whose name (or ``"O"``) has no tag in ``tag_index``.
    """
    outside = _tag(tag_index, OUTSIDE)
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    tags = [IGNORE_INDEX if end <= start else outside for start, end in offsets]
    taken = [False] * len(tags)
    for span in ordered:
        begin, inside = _tag(tag_index, f"B-{span.name}"), _tag(tag_index, f"I-{span.name}")
        first = True
        for i, (start, end) in enumerate(offsets):
            if end <= start or taken[i] or end <= span.start or span.end <= start:
                continue
            tags[i], taken[i], first = begin if first else inside, True, False
    return tags


def tags_to_spans(tags: Sequence[int], offsets: Sequence[tuple[int, int]], text: str,
                  tag_names: Sequence[str], *,
                  fits: Callable[[SlotSpan], bool] | None = None) -> list[SlotSpan]:
    """Decode BIO tag ids back into slot spans.

    Positions with an empty span (special tokens, padding) and tags of :data:`IGNORE_INDEX`
    end any open span, like ``O``. An ``I-x`` that does not continue a ``B-x``/``I-x`` starts
    a span, as conlleval does; a ``B-x`` always starts a new one.

    Args:
        tags: one tag id per token (a prediction: ``logits.argmax(-1)`` as a list).
        offsets: ``(start, end)`` per token, aligned with ``tags``.
        text: the text the offsets index into.
        tag_names: tag id -> name (:func:`bio_tag_names`).
        fits: whether a span is a value of its slot (None: every span is kept as decoded).
            A span that does not fit is replaced by the longest span that does among those
            starting inside its first token and ending inside its last one (of equal
            length, the one that starts first); with none that fits it stays as decoded.

    Returns:
        The spans in order, each from its first token's start to its last token's end (or
        cut inside those two tokens to fit), with ``text`` filled in and ``value`` None.

    Raises:
        ValueError: ``tags`` and ``offsets`` of different lengths, a tag id out of range or
            a tag name that is not ``O``/``B-x``/``I-x``.
    """
    if len(tags) != len(offsets):
        raise ValueError(f"{len(tags)} tags for {len(offsets)} offsets")
    spans: list[SlotSpan] = []
    name: str | None = None
    start = end = 0
    first_end = last_start = 0  # where the span's first token ends, its last one starts

    def close() -> None:
        if name is not None:
            span = SlotSpan(name, start, end, text[start:end])
            if fits is not None and not fits(span):
                span = _cut_to_fit(span, first_end, last_start, text, fits)
            spans.append(span)

    for tag, (s, e) in zip(tags, offsets, strict=True):
        tag = int(tag)
        if tag == IGNORE_INDEX or e <= s:
            close()
            name = None
            continue
        if not 0 <= tag < len(tag_names):
            raise ValueError(f"tag id {tag} is out of range for {len(tag_names)} tags")
        label = tag_names[tag]
        if label == OUTSIDE:
            close()
            name = None
        elif label[:2] in ("B-", "I-"):
            if label[:2] == "I-" and name == label[2:]:
                start, end, last_start = min(start, s), max(end, e), s
                continue
            close()
            name, start, end, first_end, last_start = label[2:], s, e, e, s
        else:
            raise ValueError(f"tag {label!r} is not O, B-<slot> or I-<slot>")
    close()
    return spans


def _cut_to_fit(span: SlotSpan, first_end: int, last_start: int, text: str,
                fits: Callable[[SlotSpan], bool]) -> SlotSpan:
    """The longest span of ``span``'s name that fits, starting before ``first_end`` (inside
    the first token) and ending after ``last_start`` (inside the last one); ``span`` when
    none does."""
    cuts = [(a, b) for a in range(span.start, first_end) for b in range(span.end, last_start, -1)
            if a < b and (a, b) != (span.start, span.end) and text[a:b].strip() == text[a:b]]
    for a, b in sorted(cuts, key=lambda c: (c[0] - c[1], c[0])):
        cut = SlotSpan(span.name, a, b, text[a:b])
        if fits(cut):
            return cut
    return span


def token_offsets(tokenizer: Tokenizer, texts: Sequence[str] | str, *,
                  max_length: int | None = 512,
                  truncation: bool = True) -> list[list[tuple[int, int]]]:
    """Character offsets aligned position by position with ``tokenizer(texts, ...)``.

    Row ``i`` has one ``(start, end)`` per id of ``tokenizer(texts, max_length=max_length,
    truncation=truncation)["input_ids"][i]`` before its padding: ``(0, 0)`` at ``[CLS]`` and
    ``[SEP]``, the tokens cut to ``max_length`` the same way. A number that the tokenizer's
    ``number_pattern`` turns into ``[NUM]`` keeps its piece's span (the substitution changes
    ids, never their count).

    Args:
        tokenizer: the tokenizer that makes the model's input.
        texts: a list of texts (or one text).
        max_length: as in :meth:`Tokenizer.__call__
            <headwise.text.tokenizer.Tokenizer.__call__>`.
        truncation: as in :meth:`Tokenizer.__call__`.

    Returns:
        One list of offsets per text.

    Raises:
        ValueError: a ``max_length`` too small for the special tokens.
        TypeError: an item that is not a string.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
    backend = tokenizer.backend
    encodings = backend.encode_batch(texts, add_special_tokens=False)
    if truncation and max_length is not None:
        limit = max_length - backend.num_special_tokens_to_add(False)
        if limit < 1:
            raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
        for e in encodings:
            if len(e.ids) > limit:
                e.truncate(limit)
    return [[(int(s), int(e)) for s, e in backend.post_process(enc).offsets]
            for enc in encodings]


def encode_with_tags(tokenizer: Tokenizer, texts: Sequence[str],
                     spans: Sequence[Sequence[SlotSpan]], tag_index: dict[str, int], *,
                     max_length: int | None = 512) -> dict[str, Tensor]:
    """Tokenize a batch and tag its tokens, ready for a token-classification loss.

    Args:
        tokenizer: the model's tokenizer.
        texts: the texts.
        spans: the slot spans of each text.
        tag_index: tag name -> id (from :func:`bio_tag_names`).
        max_length: the longest sequence, special tokens included (longer texts are cut).

    Returns:
        ``tokenizer(texts, max_length=max_length)`` plus ``"tags"``: (batch, seq) long,
        :data:`IGNORE_INDEX` at special tokens and padding.

    Raises:
        ValueError: ``texts`` and ``spans`` of different lengths, or a slot name with no tag.
    """
    if len(texts) != len(spans):
        raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
    batch = tokenizer(list(texts), max_length=max_length)
    offsets = token_offsets(tokenizer, texts, max_length=max_length)
    tags = torch.full_like(batch["input_ids"], IGNORE_INDEX)
    for i, (row, text_spans) in enumerate(zip(offsets, spans, strict=True)):
        if len(row) != int(batch["attention_mask"][i].sum()):
            raise RuntimeError(f"text {i}: {len(row)} offsets for "
                               f"{int(batch['attention_mask'][i].sum())} ids")
        tags[i, :len(row)] = torch.tensor(spans_to_tags(row, text_spans, tag_index))
    return {**batch, "tags": tags}


def _tag(tag_index: dict[str, int], name: str) -> int:
    if name not in tag_index:
        raise ValueError(f"no tag {name!r} in tag_index (tags: {', '.join(tag_index)})")
    return tag_index[name]

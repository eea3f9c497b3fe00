"""Saving and loading headwise models: ``model.safetensors`` + ``config.json``.

A saved model is a directory with two files:

* ``config.json``: the :class:`~headwise.models.config.ModelConfig` (with ``model_type``),
  enough to rebuild the architecture through
  :func:`~headwise.models.registry.build_model`;
* ``model.safetensors``: the state dict. Tied parameters (one tensor under several
  names, e.g. tied embeddings) are stored once, and the aliases are recorded in the
  file's metadata; heads removed with ``MultiHeadAttention.prune_heads`` are recorded
  there too, so a pruned model rebuilds with the same shapes.

Loading never unpickles anything: a directory that holds a pickle file (``*.bin``,
``*.pt``, ``*.pth``, ``*.pkl``, ``*.ckpt``) is refused. Loading back is bit-exact: every
tensor is restored in its saved dtype.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from headwise._files import follow_umask
from headwise.attention import MultiHeadAttention
from headwise.models.config import ModelConfig
from headwise.models.registry import build_model

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
#: the prefix of the classification head's parameters, per model type
HEAD_PREFIXES = {"encoder_classifier": "classifier.", "bilstm": "classifier.",
                 "joint_intent_slot": "classifier.", "bilstm_joint": "classifier."}

_META_TIED = "headwise.tied"
_META_PRUNED = "headwise.pruned_heads"


class UnsafeCheckpointError(ValueError):
    """A checkpoint in a format that can run code when loaded (pickle) was refused."""


def find_pickle_files(directory: str | Path) -> list[Path]:
    """The files directly inside ``directory`` whose suffix marks a pickle checkpoint."""
    return sorted(p for p in Path(directory).iterdir()
                  if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES)


def pickle_refusal(files: list[Path]) -> UnsafeCheckpointError:
    """The error raised for pickle checkpoints, with how to convert them."""
    names = ", ".join(p.name for p in files)
    return UnsafeCheckpointError(
        f"refusing to load pickle checkpoint file(s) {names} in {files[0].parent}: unpickling "
        "can run arbitrary code, so headwise reads safetensors only. Convert once, in an "
        "environment you trust, e.g. `safetensors.torch.save_file(torch.load(path, "
        "weights_only=True), 'model.safetensors')`, or for a Hugging Face model "
        "`AutoModel.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)`, and "
        "remove the pickle file(s).")


def model_config(model: nn.Module) -> ModelConfig:
    """The :class:`ModelConfig` that rebuilds ``model``.

    Transformer models keep one in ``model.config``; the BiLSTM keeps its constructor
    arguments as a dict, which is translated to the ``lstm_*`` fields.

    Raises:
        TypeError: a model without a usable ``config``.
    """
    config = getattr(model, "config", None)
    if isinstance(config, ModelConfig):
        return config
    if isinstance(config, dict) and getattr(model, "model_type", None) == "bilstm":
        return ModelConfig(model_type="bilstm", vocab_size=config["vocab_size"],
                           num_labels=config["num_labels"], lstm_embed_dim=config["embed_dim"],
                           lstm_hidden=config["hidden_size"], lstm_layers=config["num_layers"],
                           lstm_pooling=config["pooling"], dropout=config["dropout"],
                           pad_token_id=config["pad_token_id"])
    raise TypeError(f"{type(model).__name__} has no headwise ModelConfig in .config; only "
                    f"models built from a ModelConfig can be saved")


# -- structure the config does not carry ----------------------------------------------
def _pruned_heads(model: nn.Module) -> dict[str, list[int]]:
    """Attention modules whose heads were pruned -> the original ids of the kept heads."""
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            ids = module.head_ids.tolist()
            if ids != list(range(len(ids))) or _original_heads(model, module) != len(ids):
                out[name] = [int(i) for i in ids]
    return out


def _original_heads(model: nn.Module, module: MultiHeadAttention) -> int:
    config = getattr(model, "config", None)
    if isinstance(config, ModelConfig):
        return config.num_heads
    return module.num_heads


def _apply_pruning(model: nn.Module, pruned: dict[str, list[int]]) -> None:
    modules = dict(model.named_modules())
    for name, kept in pruned.items():
        module = modules.get(name)
        if not isinstance(module, MultiHeadAttention):
            raise ValueError(f"the checkpoint prunes heads of {name!r}, which is not an "
                             f"attention module of this model")
        module.prune_heads(sorted(set(range(module.num_heads)) - set(kept)))


def _dedupe(state: dict[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Drop names that alias an earlier tensor (same storage, offset, shape, strides); copy
    tensors that only overlap another one's storage (safetensors refuses shared memory)."""
    seen: dict[tuple, str] = {}
    storages: set[tuple] = set()
    kept: dict[str, Tensor] = {}
    tied: dict[str, str] = {}
    for name, t in state.items():
        t = t.detach()
        storage = (t.device, t.untyped_storage().data_ptr())
        key = (*storage, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
        if t.numel() and key in seen:
            tied[name] = seen[key]
            continue
        seen[key] = name
        shared = t.numel() and storage in storages
        storages.add(storage)
        kept[name] = t.clone(memory_format=torch.contiguous_format) \
            if shared or not t.is_contiguous() else t
    return kept, tied


def _check_state(state: dict[str, Tensor], expected: dict[str, Tensor], where: str) -> None:
    """Raise a ValueError naming every missing, unexpected or mis-shaped key."""
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k}: saved {tuple(state[k].shape)}, config gives {tuple(expected[k].shape)}"
              for k in sorted(set(state) & set(expected)) if state[k].shape != expected[k].shape]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing keys {missing}")
        if unexpected:
            parts.append(f"unexpected keys {unexpected}")
        if shapes:
            parts.append("shape mismatches [" + "; ".join(shapes) + "]")
        raise ValueError(f"{where}: the weights do not match the config: " + ", ".join(parts))


def _reference_state(config: ModelConfig, pruned: dict[str, list[int]]) -> dict[str, Tensor]:
    """The state dict (shapes) that ``config`` rebuilds: built on the meta device (no
    memory, no init), or on the CPU where a module needs real values (pruning)."""
    try:
        with torch.device("meta"):
            reference = build_model(config)
            _apply_pruning(reference, pruned)
    except (RuntimeError, NotImplementedError):
        reference = build_model(config)
        _apply_pruning(reference, pruned)
    return reference.state_dict()


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    follow_umask(tmp)  # safetensors writes 0600
    os.replace(tmp, path)


def write_json_atomically(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented UTF-8 JSON through a temporary file in the same folder,
    flushed to disk, then renamed over ``path``: a reader sees the old file or the whole
    new one, never half of it. The file's mode follows the umask, as a plain ``open``'s
    (0644 under the usual 022; ``tempfile.mkstemp``'s 0600 would hide a saved model from
    another user, such as a container's non-root one)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}-{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    with open(tmp, "x", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


# -- public API -----------------------------------------------------------------------
def save_model(model: nn.Module, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` for ``model`` into ``directory``.

    Args:
        model: an ``EncoderClassifier``, ``EncoderDecoder`` or ``BiLSTMClassifier``.
        directory: created if needed; existing files of the same names are replaced
            (each through a temporary file, so a crash never leaves half a file).

    Returns:
        The directory.

    Raises:
        TypeError: the model carries no ModelConfig.
        ValueError: the config does not describe the model's weights.
    """
    config = model_config(model)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors, tied = _dedupe(model.state_dict())
    pruned = _pruned_heads(model)
    _check_state({**tensors, **{a: tensors[k] for a, k in tied.items()}},
                 _reference_state(config, pruned), f"saving {type(model).__name__}")
    metadata = {"format": "pt", "model_type": config.model_type,
                _META_TIED: json.dumps(tied), _META_PRUNED: json.dumps(pruned)}
    tensors = {k: v.cpu() for k, v in tensors.items()}
    _atomic_write(directory / WEIGHTS_NAME, lambda p: save_file(tensors, p, metadata=metadata))
    _atomic_write(directory / CONFIG_NAME, config.save)
    return directory


def load_config(directory: str | Path) -> ModelConfig:
    """Read the ModelConfig of a directory written by :func:`save_model`.

    Raises:
        FileNotFoundError: no ``config.json``.
        ValueError: the file is not a headwise config (the message names it).
    """
    path = Path(directory) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {directory}")
    try:
        return ModelConfig.load(path)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path} is not a headwise model config: {e}") from e


def load_model(directory: str | Path, *, num_labels: int | None = None,
               device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild a model saved by :func:`save_model`, in eval mode.

    Args:
        directory: the saved directory.
        num_labels: a different number of classes for a classifier: everything but the
            classification head is loaded, and the head is freshly initialised (fine-tune
            a saved model on new labels). None keeps the saved head.
        device: where the tensors go.

    Returns:
        The model, with every tensor equal (``torch.equal``) to the saved one.

    Raises:
        FileNotFoundError: the directory or one of its two files is missing.
        UnsafeCheckpointError: the directory holds a pickle file.
        ValueError: the config does not match the weights (the message names the keys),
            or ``num_labels`` is given for a model without a classification head.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory at {directory}")
    pickles = find_pickle_files(directory)
    if pickles:
        raise pickle_refusal(pickles)
    config = load_config(directory)
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        raise FileNotFoundError(f"no {WEIGHTS_NAME} in {directory}")
    with safe_open(weights, framework="pt") as f:
        metadata: dict[str, Any] = f.metadata() or {}
    state = load_file(weights, device=str(device))
    for alias, name in json.loads(metadata.get(_META_TIED, "{}")).items():
        if name in state:
            state[alias] = state[name]
    head = None
    if num_labels is not None and num_labels != config.num_labels:
        head = HEAD_PREFIXES.get(config.model_type)
        if head is None:
            raise ValueError(f"num_labels applies to classifiers, not {config.model_type!r}")
        config = config.replace(num_labels=num_labels, labels=None)
    model = build_model(config)
    _apply_pruning(model, json.loads(metadata.get(_META_PRUNED, "{}")))
    model.to(device)
    expected = model.state_dict(keep_vars=True)
    for name, t in expected.items():  # restore each tensor in its saved dtype
        if name in state and t.dtype != state[name].dtype:
            t.data = t.data.to(state[name].dtype)
    if head is not None:
        state = {k: v for k, v in state.items() if not k.startswith(head)}
        state.update({k: v for k, v in expected.items() if k.startswith(head)})
    _check_state(state, expected, f"loading {directory}")
    model.load_state_dict(state, strict=True)
    return model.eval()

"""Atomic training checkpoints: safetensors + JSON, never pickle.

A checkpoint is a directory ``out_dir/step-000123/`` holding exactly:

* ``model.safetensors``: the model weights (tied weights stored once, see ``aliases``);
* ``state.safetensors``: every other tensor (optimizer moments, RNG states, ...);
* ``state.json``: the format marker, the step, the aliases and the nested training state
  with references into ``state.safetensors``.

Writing is atomic: the files go to a hidden temporary directory, each is fsynced, the
directory is fsynced and then renamed to its final name, and only then is the ``latest``
pointer (a small JSON file) replaced through write-temp + fsync + ``os.replace``. A crash
at any moment leaves either the old or the new checkpoint complete, never a torn one.
Loading refuses any directory that is not exactly this format.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from headwise._files import follow_umask
from headwise.train.serialize import (
    dedupe_state_dict,
    flatten_state,
    restore_aliases,
    unflatten_state,
)

FORMAT = "headwise.train.checkpoint"
VERSION = 1
MODEL_FILE = "model.safetensors"
STATE_TENSORS_FILE = "state.safetensors"
STATE_FILE = "state.json"
FILES = (MODEL_FILE, STATE_TENSORS_FILE, STATE_FILE)
LATEST = "latest"
BEST = "best"
_STEP_DIR = re.compile(r"^step-(\d+)$")
_PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt", ".tar")


class CheckpointError(ValueError):
    """A directory that is not a complete headwise checkpoint."""


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: its directory.
        step: optimizer steps done when it was written.
        model_state: the model's state dict (aliases restored).
        state: the nested training state, tensors in place.
    """

    path: Path
    step: int
    model_state: dict[str, Tensor]
    state: dict[str, Any]


def step_dir_name(step: int) -> str:
    """``step-000123``."""
    return f"step-{step:06d}"


def save_checkpoint(out_dir: str | Path, step: int, model_state: Mapping[str, Tensor],
                    state: Mapping[str, Any]) -> Path:
    """Write a checkpoint atomically and point ``latest`` at it.

    Args:
        out_dir: directory of the run (created if needed).
        step: optimizer steps done; names the directory.
        model_state: the model's state dict.
        state: nested training state (see :mod:`headwise.train.serialize`).

    Returns:
        The checkpoint directory.

    Raises:
        TypeError: ``state`` holds a value that cannot be stored without pickle.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights, aliases = dedupe_state_dict(model_state)
    tree, tensors = flatten_state(dict(state), "state")
    meta = {"format": FORMAT, "version": VERSION, "step": step, "aliases": aliases,
            "state": tree}
    json.dumps(meta)  # fail on a non-JSON value before touching the disk
    final = out_dir / step_dir_name(step)
    tmp = out_dir / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    _write_tensors(tmp / MODEL_FILE, weights)
    _write_tensors(tmp / STATE_TENSORS_FILE, tensors)
    _write_json(tmp / STATE_FILE, meta)
    _fsync_dir(tmp)
    if final.exists():  # left by a run that died before moving `latest` past it
        _discard(final)
    os.rename(tmp, final)
    _fsync_dir(out_dir)
    write_pointer(out_dir / LATEST, final.name)
    return final


def write_pointer(path: Path, target: str) -> None:
    """Atomically make the JSON pointer file ``path`` name the checkpoint ``target``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    _write_json(tmp, {"checkpoint": target})
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_pointer(path: str | Path) -> Path | None:
    """The checkpoint directory a pointer file names, or None if there is no pointer."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        target = json.loads(path.read_text(encoding="utf-8"))["checkpoint"]
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path} is not a checkpoint pointer: {e}") from e
    if not _STEP_DIR.match(str(target)):
        raise CheckpointError(f"{path} names {target!r}, not a step-N checkpoint")
    return path.parent / target


def list_checkpoints(out_dir: str | Path) -> list[Path]:
    """Every complete checkpoint directory in ``out_dir``, oldest step first."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    found = []
    for p in out_dir.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and p.is_dir() and all((p / f).is_file() for f in FILES):
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def find_latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint in ``out_dir`` (None if there is none).

    A checkpoint directory exists only once complete (it is renamed into place), so the
    newest one wins even when a crash came before ``latest`` was moved to it.
    """
    ckpts = list_checkpoints(out_dir)
    return ckpts[-1] if ckpts else None


def validate_checkpoint(path: str | Path) -> dict[str, Any]:
    """Check that ``path`` is a complete checkpoint of this format; return its JSON.

    Raises:
        CheckpointError: not a directory, a missing or extra file (any pickle file is
            refused), or a JSON file without this format's marker.
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a checkpoint directory")
    present = {p.name for p in path.iterdir()}
    pickles = sorted(n for n in present if n.endswith(_PICKLE_SUFFIXES))
    if pickles:
        raise CheckpointError(f"{path} holds {pickles}: headwise checkpoints never contain "
                              "pickle files and will not load them")
    missing = [f for f in FILES if f not in present]
    if missing:
        raise CheckpointError(f"{path} is incomplete: missing {missing}")
    extra = sorted(present - set(FILES))
    if extra:
        raise CheckpointError(f"{path} holds unexpected files {extra}; a checkpoint holds "
                              f"only {list(FILES)}")
    try:
        meta = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path / STATE_FILE} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path / STATE_FILE} is not a {FORMAT} file")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {meta.get('version')}; "
                              f"this headwise reads version {VERSION}")
    return meta


def load_checkpoint(path: str | Path, *, map_location: str = "cpu") -> Checkpoint:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Args:
        path: the checkpoint directory.
        map_location: device the tensors are loaded to.

    Raises:
        CheckpointError: anything but a complete checkpoint of this format.
    """
    path = Path(path)
    meta = validate_checkpoint(path)
    try:
        weights = load_file(path / MODEL_FILE, device=map_location)
        tensors = load_file(path / STATE_TENSORS_FILE, device=map_location)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: unreadable safetensors file: {e}") from e
    try:
        model_state = restore_aliases(weights, meta.get("aliases", {}))
        state = unflatten_state(meta["state"], tensors)
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{path}: inconsistent checkpoint: {e}") from e
    return Checkpoint(path=path, step=int(meta["step"]), model_state=model_state, state=state)


def load_model_weights(path: str | Path, model: nn.Module, *, strict: bool = True) -> None:
    """Load only the model weights of a checkpoint into ``model``.

    Raises:
        CheckpointError: not a checkpoint of this format.
    """
    path = Path(path)
    meta = validate_checkpoint(path)
    weights = restore_aliases(load_file(path / MODEL_FILE), meta.get("aliases", {}))
    model.load_state_dict(weights, strict=strict)


def prune_checkpoints(out_dir: str | Path, keep: int | None,
                      protect: tuple[Path, ...] = ()) -> None:
    """Delete all but the ``keep`` newest checkpoints, never one in ``protect``."""
    if keep is None:
        return
    ckpts = list_checkpoints(out_dir)
    protected = {Path(p).resolve() for p in protect}
    for p in ckpts[: max(0, len(ckpts) - keep)]:
        if p.resolve() not in protected:
            _discard(p)


def clean_temporaries(out_dir: str | Path) -> None:
    """Remove temporary and discarded directories left by a crash."""
    out_dir = Path(out_dir)
    if out_dir.is_dir():
        for p in out_dir.iterdir():
            if p.name.startswith((".tmp-", ".trash-")) and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


def _discard(path: Path) -> None:
    # Rename first (atomic) so a half-deleted directory never looks like a checkpoint.
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}")
    if trash.exists():
        shutil.rmtree(trash)
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _write_tensors(path: Path, tensors: Mapping[str, Tensor]) -> None:
    save_file(dict(tensors), str(path), metadata={"format": "pt"})
    follow_umask(path)  # safetensors writes 0600
    _fsync_file(path)


def _write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # platforms without directory file descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resolve_resume(out_dir: str | Path, resume: bool | str | Path) -> Path | None:
    """The checkpoint a run should continue from.

    Args:
        out_dir: the run's directory.
        resume: False for a fresh start, True for the newest complete checkpoint in
            ``out_dir`` (None if there is none yet), or a checkpoint directory.

    Raises:
        FileExistsError: a fresh start in a directory that holds checkpoints.
        CheckpointError: ``resume`` names a directory that does not exist.
    """
    if resume is False:
        if list_checkpoints(out_dir):
            raise FileExistsError(f"{out_dir} already holds checkpoints; pass resume=True to "
                                  "continue that run, or use another out_dir")
        return None
    if resume is True:
        return find_latest_checkpoint(out_dir)
    path = Path(resume)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint directory at {path}")
    return path

"""Saving a detector next to a classifier: ``ood.json`` (name, hyperparameters, threshold,
what the threshold did on validation data) and ``ood.safetensors`` (the fitted arrays;
absent for a detector without any). Loading never unpickles anything.

``ood.json`` records the SHA-256 of the arrays file and is written after it, atomically,
so a detector whose save was interrupted is refused on loading rather than mixed with
another save's arrays.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from headwise._files import file_sha256, follow_umask
from headwise.intent.decision.ood.base import OodDetector
from headwise.intent.decision.ood.registry import detector_from_state
from headwise.models.io import write_json_atomically

OOD_FILE = "ood.json"
OOD_ARRAYS = "ood.safetensors"


def save_detector(detector: OodDetector, directory: str | Path, *, arrays: bool = True
                  ) -> Path:
    """Write ``detector`` into ``directory`` (which must exist); returns ``ood.json``.

    Args:
        detector: a fitted detector.
        directory: the classifier's directory.
        arrays: also (re)write ``ood.safetensors``; False keeps the file there (a new
            threshold only, e.g. ``headwise calibrate``), after checking it is the one
            the old ``ood.json`` names.

    Raises:
        ValueError: an unfitted detector, or ``arrays=False`` without matching arrays
            on disk.
    """
    from safetensors.numpy import save_file

    if not detector.fitted:
        raise ValueError(f"the {detector.name} detector is not fitted")
    directory = Path(directory)
    state, tensors = detector.to_state()
    path = directory / OOD_ARRAYS
    digest = None
    if tensors and arrays:
        tmp = path.with_name(path.name + ".tmp")
        save_file(tensors, str(tmp), metadata={"format": "headwise-ood"})
        follow_umask(tmp)  # safetensors writes 0600
        os.replace(tmp, path)
        digest = file_sha256(path)
    elif tensors:
        digest = file_sha256(path) if path.is_file() else None
        old = json.loads((directory / OOD_FILE).read_text(encoding="utf-8")) \
            if (directory / OOD_FILE).is_file() else {}
        if digest is None or old.get("arrays_sha256") != digest:
            raise ValueError(f"{directory} holds no arrays of this detector to keep")
    elif arrays and path.exists():
        path.unlink()
    meta = {"format": "headwise-ood", "version": 1, **state,
            "arrays": sorted(tensors), "arrays_sha256": digest}
    return write_json_atomically(directory / OOD_FILE, meta)


def load_detector(directory: str | Path) -> OodDetector:
    """Read the detector :func:`save_detector` wrote into ``directory``.

    Raises:
        FileNotFoundError: no ``ood.json`` (or its arrays file is missing).
        ValueError: an invalid file, or arrays that are not the ones ``ood.json`` names.
    """
    from safetensors.numpy import load_file

    directory = Path(directory)
    meta_path = directory / OOD_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{directory} has no {OOD_FILE}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{meta_path} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != "headwise-ood":
        raise ValueError(f"{meta_path} is not a headwise out-of-scope detector file")
    arrays: dict[str, np.ndarray] = {}
    if meta.get("arrays"):
        path = directory / OOD_ARRAYS
        if not path.is_file():
            raise FileNotFoundError(f"{meta_path} names arrays but {path} is missing")
        if file_sha256(path) != meta.get("arrays_sha256"):
            raise ValueError(f"{path} is not the arrays file {meta_path} was saved with (an "
                             f"interrupted save?)")
        arrays = load_file(str(path))
        if sorted(arrays) != sorted(meta["arrays"]):
            raise ValueError(f"{path} holds {sorted(arrays)}, {meta_path} names "
                             f"{meta['arrays']}")
    return detector_from_state(meta, arrays)


def remove_detector(directory: str | Path) -> None:
    """Delete a saved detector's files from ``directory`` (nothing there: nothing done)."""
    for name in (OOD_FILE, OOD_ARRAYS):
        p = Path(directory) / name
        if p.exists():
            p.unlink()

"""The teacher of a distillation (:mod:`.distillation`): a saved classifier loaded to teach
(:func:`load_teacher`), what a student records of it (:func:`teacher_identity`, with the
SHA-256 fingerprint of its directory, :func:`directory_fingerprint`), its calibrated
log-probabilities of texts (:func:`teacher_log_probs`), and their cache in the student's
directory (:func:`cached_teacher_logits`: ``teacher_targets.json`` +
``teacher_targets.safetensors``, keyed by text and by the teacher's fingerprint, so a
resumed run reads them back instead of running the teacher again)."""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file
from tqdm.auto import tqdm

from headwise._files import follow_umask, hash_file_into
from headwise.intent.answering import CalibratedClassifier, ProbabilityClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.kinds import kind_of, load_single_label
from headwise.models.config import ModelConfig
from headwise.models.io import write_json_atomically

__all__ = ["STUDENT_INIT", "TARGETS_FILE", "TARGETS_WEIGHTS", "Teacher",
           "cached_teacher_logits", "directory_fingerprint", "load_teacher",
           "read_soft_targets", "teacher_identity", "teacher_intents", "teacher_log_probs"]

#: the soft-target cache in a student's directory: its index (texts, teacher) and logits
TARGETS_FILE = "teacher_targets.json"
TARGETS_WEIGHTS = "teacher_targets.safetensors"
#: where a ``truncate:K`` student's starting weights are written (removed after success)
STUDENT_INIT = "student_init"
#: files a teacher's fingerprint leaves out: summaries, and a student's own cache
_UNHASHED = {"train_summary.json", TARGETS_FILE, TARGETS_WEIGHTS}

#: a teacher: a single-label classifier or a compound one
Teacher = ProbabilityClassifier | CompoundClassifier


def teacher_intents(teacher: Teacher) -> list[str]:
    """The teacher's intents, the columns of its soft targets (a compound teacher's
    ``intents``, a single-label one's ``labels``)."""
    return list(teacher.intents if isinstance(teacher, CompoundClassifier) else teacher.labels)


def load_teacher(directory: str | Path) -> Teacher:
    """The classifier saved in ``directory``: a single-label one (a network, a TF-IDF
    model or an ensemble, as :func:`~headwise.intent.kinds.load_single_label` reads them)
    or a compound one.

    Raises:
        ValueError: a kind that cannot teach (its registry entry says why).
        FileNotFoundError: no classifier there (the message says what is).
    """
    kind = kind_of(directory)
    kind.require("teacher", directory)
    return kind.load(directory) if kind.multi_label else load_single_label(directory, "teacher")


def directory_fingerprint(directory: str | Path) -> str:
    """Hex SHA-256 of a saved classifier: every ``.json`` and ``.safetensors`` file under
    ``directory`` (its path and bytes, in sorted order), but for training summaries, a
    student's soft-target cache and anything under ``checkpoints/`` or ``student_init/``.
    An exported ONNX file (derived from the same weights) is not part of it."""
    root = Path(directory)
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file()
                   and p.suffix in (".json", ".safetensors") and p.name not in _UNHASHED
                   and not {"checkpoints", STUDENT_INIT} & set(p.relative_to(root).parts))
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        hash_file_into(digest, path)
        digest.update(b"\0")
    return digest.hexdigest()


def teacher_identity(teacher: Teacher, directory: str | Path | None = None
                     ) -> dict[str, Any]:
    """What a student records of its teacher: ``path``, ``kind`` (its class), ``model``
    (its recipe's architecture, ``tfidf`` or ``ensemble of N``), ``sha256``
    (:func:`directory_fingerprint`; None for a teacher given as an object), ``intents``,
    ``temperature``, ``layers`` (a Transformer encoder's) and its validation scores
    (accuracy and macro-F1; a compound teacher's micro-F1, macro-F1 and exact match)."""
    info = getattr(teacher, "info", None) or {}
    recipe = info.get("recipe") or {}
    members = getattr(teacher, "members", None)
    part = recipe.get("architecture") or {}
    model = (part["type"] + (f":{part['name']}" if part.get("name") else "") if part
             else "ensemble of " + str(len(members)) if members else type(teacher).__name__)
    config = getattr(getattr(teacher, "model", None), "config", None)
    return {"path": None if directory is None else str(Path(directory).resolve()),
            "kind": type(teacher).__name__, "model": model,
            "sha256": None if directory is None else directory_fingerprint(directory),
            "intents": len(teacher_intents(teacher)),
            "temperature": getattr(teacher, "temperature", None),
            "layers": config.num_layers if isinstance(config, ModelConfig)
            and config.model_type not in ("bilstm", "bilstm_joint") else None,
            "valid": {k: v for k, v in (info.get("valid") or {}).items()
                      if k in ("accuracy", "macro_f1", "micro_f1", "exact_match")} or None}


def teacher_log_probs(teacher: Teacher, texts: Sequence[str], *,
                      batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """The teacher's calibrated log-probabilities (len(texts), intents), float64, batched,
    with a progress bar: ``log_softmax(logits / temperature)`` for a classifier with logits
    (a network, a TF-IDF model), else the log of its probabilities (an ensemble, and a
    compound teacher's per-intent sigmoid probabilities, each its own; clipped at the
    smallest positive float64)."""
    texts = list(texts)
    out = np.empty((len(texts), len(teacher_intents(teacher))), dtype=np.float64)
    chunk = 16 * batch_size
    with tqdm(total=len(texts), desc="teacher", unit="text", disable=not progress) as bar:
        for start in range(0, len(texts), chunk):
            part = texts[start:start + chunk]
            if isinstance(teacher, CompoundClassifier):
                p = teacher.analyse(part, batch_size=batch_size)[0].astype(np.float64)
                out[start:start + len(part)] = np.log(np.clip(p, np.finfo(np.float64).tiny,
                                                              None))
            elif isinstance(teacher, CalibratedClassifier):
                z = teacher.logits(part, batch_size=batch_size) / teacher.temperature
                z = z - z.max(1, keepdims=True)
                out[start:start + len(part)] = z - np.log(np.exp(z).sum(1, keepdims=True))
            else:
                p = teacher.predict_proba(part, batch_size=batch_size)
                out[start:start + len(part)] = np.log(np.clip(p, np.finfo(np.float64).tiny,
                                                              None))
            bar.update(len(part))
    return out


def read_soft_targets(directory: str | Path) -> tuple[dict[str, Any], np.ndarray] | None:
    """The soft-target cache of a student directory: its index (``texts``, ``labels``,
    ``teacher``) and the logits (rows, intents); None when absent, partial or corrupt."""
    directory = Path(directory)
    index, weights = directory / TARGETS_FILE, directory / TARGETS_WEIGHTS
    if not (index.is_file() and weights.is_file()):
        return None
    try:
        meta = json.loads(index.read_text(encoding="utf-8"))
        logits = load_file(str(weights))["logits"]
    except (OSError, ValueError, KeyError):
        return None
    if meta.get("format") != "headwise-teacher-targets" or \
            logits.shape != (len(meta.get("texts", ())), len(meta.get("labels", ()))):
        return None
    return meta, logits.astype(np.float64)


def cached_teacher_logits(out_dir: str | Path, teacher: Teacher,
                          identity: dict[str, Any], texts: Sequence[str], *,
                          batch_size: int = 64, progress: bool = True
                          ) -> tuple[np.ndarray, dict[str, Any]]:
    """The teacher's log-probabilities of ``texts`` (:func:`teacher_log_probs`), reading
    back those the cache in ``out_dir`` holds for the same teacher (same fingerprint and
    intents) and computing only the others; the cache is rewritten (atomically, the
    index last) to hold exactly ``texts`` when it did not.

    Returns:
        ``(logits, stats)``: stats are ``rows``, ``computed``, ``reused`` and ``seconds``.
    """
    out_dir = Path(out_dir)
    texts = list(texts)
    teacher_key = {"sha256": identity.get("sha256"), "path": identity.get("path")}
    cached = read_soft_targets(out_dir)
    known: dict[str, np.ndarray] = {}
    if cached is not None:
        meta, logits = cached
        if meta.get("teacher", {}).get("sha256") == teacher_key["sha256"] \
                and meta.get("labels") == teacher_intents(teacher):
            known = dict(zip(meta["texts"], logits, strict=True))
    missing = [t for t in texts if t not in known]
    start = time.perf_counter()
    if missing:
        fresh = teacher_log_probs(teacher, missing, batch_size=batch_size, progress=progress)
        known.update(zip(missing, fresh, strict=True))
    seconds = time.perf_counter() - start
    rows = np.stack([known[t] for t in texts]) if texts else \
        np.empty((0, len(teacher_intents(teacher))))
    if cached is None or cached[0]["texts"] != texts or missing:
        out_dir.mkdir(parents=True, exist_ok=True)
        # a fresh name, created by save_file: its mode follows the umask (not mkstemp's 0600)
        tmp = out_dir / f".teacher_targets-{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
        save_file({"logits": np.ascontiguousarray(rows)}, tmp)
        follow_umask(tmp)  # safetensors writes 0600
        os.replace(tmp, out_dir / TARGETS_WEIGHTS)
        write_json_atomically(out_dir / TARGETS_FILE, {
            "format": "headwise-teacher-targets", "version": 1,
            "what": "the teacher's calibrated log-probabilities, one row per text",
            "teacher": teacher_key, "labels": teacher_intents(teacher), "texts": texts})
    return rows, {"file": TARGETS_FILE, "rows": len(texts), "computed": len(missing),
                  "reused": len(texts) - len(missing), "seconds": round(seconds, 1)}

"""Warm start: continue training from a saved classifier (``headwise train --init-from MODEL``).

A warm start trains a copy of a saved model (its parent) on new data instead of a fresh
network, for the same intents with new rows, or with new intents:

- the recipe is the parent's (:func:`warm_recipe`); a caller may change how it trains
  (epochs, learning rate, levers, decision) but not what it is: another architecture, a
  pretrained checkpoint other than the parent's, or another task is refused with a sentence
  that says what to do; without ``train.epochs`` a warm start trains :func:`warm_epochs` of
  the parent's epochs (a third);
- the intents are the parent's, in its order, then the new ones (:func:`grown_intents`); an
  intent of the parent that the data no longer has is refused (a warm start cannot remove
  one);
- the network is the parent's (:func:`grow_network`): every weight copied; the
  classification head (and a compound model's slot tagger) grows by rows, the old rows
  copied, the new rows those of a freshly built head (the same initialisation a run from
  scratch gives); the prior correction the parent folded into its head's bias is taken back
  out first, since the new run chooses its own. For a Transformer or a pretrained encoder
  the training flows then fit the new rows on the parent's features, the old rows fixed
  (``fit_linear_probe(keep=...)``, ``fit_multilabel_probe(only=...)``,
  ``fit_tag_probe(keep=...)`` of :mod:`headwise.intent.training.linear_probe`);
- the tokenizer stays for a pretrained encoder; a from-scratch one grows
  (:func:`grow_tokenizer`): pieces of the new texts that the parent's vocabulary reads as
  ``[UNK]`` get new ids after the old ones, and the embedding matrix new rows, the old rows
  copied;
- the rows of the parent's intents are kept, or a seeded share of them (``replay``,
  :func:`replay_sample`): 0 trains on the new intents' rows only, which shows how much a
  network forgets without replay (BENCHMARKS ``warm-start``);
- a TF-IDF parent is refitted on the new data (its fit takes seconds and has no state
  worth continuing from); its lineage is recorded all the same.

The saved model records its lineage (:func:`lineage_record`, ``info["lineage"]``): the
parent's directory and identity (:func:`model_identity`), the share replayed, what grew,
and the SHA-256 of the data files (and of the training rows) it was trained on.
``headwise eval MODEL --data F --parent PARENT`` compares the two
(:mod:`headwise.intent.comparison`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise._files import file_sha256, hash_file_into
from headwise.intent.kinds import kind_of, load_classifier
from headwise.models.config import ModelConfig
from headwise.models.registry import build_model
from headwise.text.tokenizer import Tokenizer

__all__ = ["WARM_EPOCH_SHARE", "WarmStart", "grow_network", "grow_tokenizer", "grown_intents",
           "lineage_of", "lineage_record", "model_identity", "replay_sample",
           "undo_prior_correction", "warm_epochs", "warm_recipe"]

#: the share of its parent's epochs a warm start trains when its recipe names none: the
#: issue's budget (a warm start at most a third of a full retrain's time), not a value
#: chosen among others on validation rows; its accuracy against a full retrain at this
#: setting: BENCHMARKS ``warm-start:cpu``
WARM_EPOCH_SHARE = 1 / 3

#: the saved kinds a warm start continues from, and the task each one is
_TASKS = {"network": "single_label", "tfidf": "single_label", "compound": "multi_label"}
#: the weights files (besides the kind's metadata file) that make a model's identity
_WEIGHT_SUFFIXES = (".safetensors", ".npz", ".npy")


@dataclass(frozen=True)
class WarmStart:
    """Where a warm start begins and what it keeps.

    Attributes:
        parent: the saved model directory to continue from (a network, compound or TF-IDF
            classifier, as ``headwise train`` saves it).
        replay: the share of the parent's intents' training rows kept, drawn per intent with
            the recipe's seed (1: all of them; 0: none, the new intents' rows only).
        data_files: the data files the rows were read from; their SHA-256 goes into the
            lineage (``headwise train`` passes ``--data`` and ``--valid``).
    """

    parent: Path
    replay: float = 1.0
    data_files: tuple[Path, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "parent", Path(self.parent))
        object.__setattr__(self, "data_files", tuple(Path(p) for p in self.data_files))
        if isinstance(self.replay, bool) or not isinstance(self.replay, (int, float)) \
                or not 0.0 <= self.replay <= 1.0:
            raise ValueError(f"replay must be a share in [0, 1], got {self.replay!r}")

    def kind(self) -> str:
        """The parent's kind (``"network"``, ``"tfidf"`` or ``"compound"``).

        Raises:
            FileNotFoundError: no saved model in ``parent``.
            ValueError: a kind a warm start cannot continue from (an ensemble: continue
                from its network member, ``member-0``).
        """
        kind = kind_of(self.parent).name
        if kind == "ensemble":
            raise ValueError(f"--init-from {self.parent} is a blend of a network and TF-IDF; "
                             f"continue from its network, {self.parent / 'member-0'} (the "
                             f"blend is chosen again when the recipe's levers.blend is tfidf)")
        if kind not in _TASKS:
            raise ValueError(f"--init-from {self.parent} is a {kind!r} model; a warm start "
                             f"continues from a network, compound or TF-IDF classifier")
        return kind

    def load(self) -> Any:
        """The parent classifier (checked as :meth:`kind` checks it)."""
        self.kind()
        return load_classifier(self.parent)


# --- the recipe -----------------------------------------------------------------------------
def warm_epochs(parent_epochs: int) -> int:
    """The epochs of a warm start whose recipe names none: :data:`WARM_EPOCH_SHARE` of the
    parent's, rounded up, at least 1 (early stopping on validation rows still chooses the
    epoch kept).

    Raises:
        ValueError: ``parent_epochs`` not a positive int.
    """
    if isinstance(parent_epochs, bool) or not isinstance(parent_epochs, int) \
            or parent_epochs < 1:
        raise ValueError(f"a parent's epochs must be a positive int, got {parent_epochs!r}")
    return max(1, math.ceil(parent_epochs * WARM_EPOCH_SHARE - 1e-9))


def warm_recipe(parent: str | Path, given: dict[str, Any]) -> dict[str, Any]:
    """The recipe of a warm start, by part: the parent's recorded recipe with what ``given``
    (a ``--config`` file and options, by part) changes in how it trains.

    The architecture, its sizes and checkpoint, the tokenizer and the task stay the
    parent's; ``given`` may repeat them but not change them. The linear probe is off (the
    head is the parent's, not a fresh one to fit). Without ``train.epochs`` in ``given``, a
    network trains :func:`warm_epochs` of the parent's (a TF-IDF parent is refitted, it has
    no epochs).

    Returns:
        The merged recipe data, for
        :meth:`~headwise.intent.training.recipe.IntentRecipe.from_dict`.

    Raises:
        ValueError: the parent records no recipe; ``given`` names another architecture, an
            architecture field of another value, another task, or the linear probe.
    """
    start = WarmStart(Path(parent))
    kind = start.kind()
    meta = _metadata(start.parent)
    recorded = (meta.get("info") or {}).get("recipe")
    if not isinstance(recorded, dict):
        raise ValueError(f"--init-from {parent} records no training recipe (it was not saved "
                         f"by headwise train); train it again, or from scratch without "
                         f"--init-from")
    merged = copy.deepcopy(recorded)
    parent_arch = merged.get("architecture", {})
    for name, value in (given.get("architecture") or {}).items():
        if parent_arch.get(name) != value:
            raise ValueError(
                f"--init-from {parent} is a {_describe_architecture(parent_arch)}; the recipe "
                f"asks for architecture.{name}={value!r} (the parent's is "
                f"{parent_arch.get(name)!r}). A warm start keeps its parent's network: "
                f"remove --model and architecture.{name} from the recipe, or train from "
                f"scratch without --init-from")
    task = (given.get("task") or {}).get("type")
    if task is not None and task != _TASKS[kind]:
        raise ValueError(f"--init-from {parent} is a {_TASKS[kind].replace('_', '-')} "
                         f"classifier and the recipe's task is {task}; a warm start keeps the "
                         f"task: train from scratch without --init-from for the other one")
    if (given.get("levers") or {}).get("linear_probe"):
        raise ValueError("levers.linear_probe fits a fresh head before fine-tuning; a warm "
                         "start keeps its parent's head: remove --linear-probe")
    train = merged.get("train")
    if kind != "tfidf" and isinstance(train, dict) and isinstance(train.get("epochs"), int) \
            and "epochs" not in (given.get("train") or {}):
        train["epochs"] = warm_epochs(train["epochs"])
    for part, fields in given.items():
        if part == "architecture":
            continue
        if isinstance(fields, dict) and isinstance(merged.get(part), dict):
            merged[part].update(copy.deepcopy(fields))
        else:
            merged[part] = copy.deepcopy(fields)
    levers = merged.get("levers")
    if isinstance(levers, dict) and (levers.get("linear_probe") or (
            levers.get("linear_probe") is None and parent_arch.get("type") == "pretrained")):
        levers["linear_probe"] = False  # the parent's head is kept, not probed afresh
    return merged


def _describe_architecture(arch: dict[str, Any]) -> str:
    if arch.get("type") == "pretrained":
        return f"fine-tuned pretrained encoder ({arch.get('name')})"
    return f"{arch.get('type')} model"


# --- the intents and rows -------------------------------------------------------------------
def grown_intents(parent: Sequence[str], labels: Sequence[str], replay: float) -> list[str]:
    """The intents of a warm start: the parent's, in its order, then the data's new ones,
    sorted.

    Args:
        parent: the parent's intents.
        labels: the training rows' intents (in scope).
        replay: the share of the parent's intents' rows kept; 0 (no replay) lets the data
            lack the parent's intents.

    Raises:
        ValueError: with replay above 0, an intent of the parent that no training row has
            (a warm start cannot remove an intent).
    """
    have = set(labels)
    missing = [name for name in parent if name not in have]
    if missing and replay > 0:
        raise ValueError(f"{len(missing)} of the parent's intents have no training row: "
                         f"{missing[:5]}; a warm start keeps every intent of its parent. Give "
                         f"rows of them (or a share with --replay), or train from scratch "
                         f"without --init-from to drop an intent")
    known = set(parent)
    return list(parent) + sorted(have - known)


def replay_sample(labels: Sequence[str], parent: Sequence[str], replay: float,
                  seed: int) -> list[int]:
    """The indices of the rows a warm start trains on: every row of a new intent, and of
    each parent intent a seeded ``replay`` share of its rows (rounded, at least one while
    ``replay`` is above 0), in their original order."""
    if replay >= 1.0:
        return list(range(len(labels)))
    known = set(parent)
    by_intent: dict[str, list[int]] = defaultdict(list)
    keep: list[int] = []
    for i, y in enumerate(labels):
        (by_intent[y] if y in known else keep).append(i)
    rng = random.Random(seed)
    for name in sorted(by_intent):
        rows = by_intent[name]
        if replay > 0:
            keep += rng.sample(rows, max(1, round(len(rows) * replay)))
    return sorted(keep)


# --- the network ----------------------------------------------------------------------------
def undo_prior_correction(model: nn.Module, info: dict[str, Any]) -> None:
    """Take the prior correction that the parent folded into its head's bias
    (``info["prior_correction"]``: ``tau`` and the log prior) back out, in place, so the
    warm start trains the head as it was trained."""
    record = info.get("prior_correction")
    if not record or not record.get("tau"):
        return
    shift = float(record["tau"]) * np.asarray(record["log_prior"], np.float64)
    with torch.no_grad():
        head = model.classifier
        head.bias.add_(torch.as_tensor(shift, dtype=head.bias.dtype, device=head.bias.device))


def _fresh_like(model: nn.Module, **changes: Any) -> nn.Module:
    """A freshly initialised network of ``model``'s architecture with ``changes`` to its
    config (``labels``, ``num_labels``, ``vocab_size``, ``slot_tags``)."""
    config = model.config
    if isinstance(config, ModelConfig):
        return build_model(config.replace(**changes))
    if isinstance(config, dict) and hasattr(type(model), "from_config"):
        return type(model).from_config({**config, **{k: v for k, v in changes.items()
                                                      if k in config}})
    raise TypeError(f"{type(model).__name__} has no config to build a grown copy from")


def grow_network(model: nn.Module, old_labels: Sequence[str], labels: Sequence[str], *,
                 vocab_size: int | None = None, old_tags: Sequence[str] | None = None,
                 tags: Sequence[str] | None = None) -> nn.Module:
    """A copy of ``model`` for ``labels`` (the old ones in any order, and new ones), a
    vocabulary of ``vocab_size`` (at least the old) and, for a joint model, the slot ``tags``.

    Every weight is the parent's. The head's rows are moved by intent name (and the
    tagger's by tag name); a new intent's or tag's row is a freshly built head's, the
    initialisation a run from scratch gives it. Rows of a grown vocabulary (the
    embeddings, and every other tensor whose first axis is the vocabulary) are copied for
    the old ids and fresh for the new ones.

    Raises:
        ValueError: ``labels`` lacks an old intent or ``tags`` an old tag, a smaller
            vocabulary, or a weight whose shape changed in another way.
    """
    lost = [y for y in old_labels if y not in set(labels)]
    if lost:
        raise ValueError(f"the grown head lacks the parent's intents {lost[:5]}")
    old_vocab = _vocab_size(model)
    vocab_size = old_vocab if vocab_size is None else vocab_size
    if vocab_size < old_vocab:
        raise ValueError(f"a vocabulary cannot shrink in a warm start ({old_vocab} -> "
                         f"{vocab_size})")
    changes: dict[str, Any] = {"num_labels": len(labels), "labels": list(labels),
                               "vocab_size": vocab_size}
    old_tags = list(old_tags or [])
    if tags is not None or old_tags:
        tags = list(tags or [])
        missing = [t for t in old_tags if t not in set(tags)]
        if missing:
            raise ValueError(f"the grown slot tagger lacks the parent's tags {missing[:5]}")
        changes["slot_tags"] = tags or None
    if not isinstance(model.config, ModelConfig):
        changes.pop("labels")
    fresh = _fresh_like(model, **changes)
    label_rows = [list(labels).index(y) for y in old_labels]
    tag_rows = [tags.index(t) for t in old_tags] if old_tags else []
    target = fresh.state_dict()
    with torch.no_grad():
        for key, old in model.state_dict().items():
            if key not in target:
                raise ValueError(f"the grown network has no {key}")
            new = target[key]
            if old.shape == new.shape and not _is_head(key):
                new.copy_(old)
            elif key.startswith("classifier."):
                new[label_rows] = old.to(new.dtype)
            elif key.startswith("tagger."):
                new[tag_rows] = old.to(new.dtype)
            elif old.ndim >= 1 and old.shape[1:] == new.shape[1:] \
                    and old.shape[0] == old_vocab and new.shape[0] == vocab_size:
                new[:old_vocab] = old.to(new.dtype)
            else:
                raise ValueError(f"{key} changed shape {tuple(old.shape)} -> "
                                 f"{tuple(new.shape)} in a way a warm start cannot copy")
    fresh.load_state_dict(target)
    return fresh


def _is_head(key: str) -> bool:
    return key.startswith(("classifier.", "tagger."))


def _vocab_size(model: nn.Module) -> int:
    config = model.config
    return int(config.vocab_size if isinstance(config, ModelConfig) else config["vocab_size"])


# --- the tokenizer --------------------------------------------------------------------------
def grow_tokenizer(tokenizer: Tokenizer, texts: Sequence[str], *, kind: str,
                   vocab_size: int) -> tuple[Tokenizer, list[str]]:
    """A from-scratch tokenizer grown for ``texts``: the pieces (after the tokenizer's own
    normalisation and pre-tokenisation) that it reads with ``[UNK]`` are learnt by a
    tokenizer of the same ``kind`` (``"char"`` or ``"wordpiece"``, at most ``vocab_size``
    tokens) and its tokens the vocabulary lacks get the next ids; every old id stays.
    Numbers the tokenizer's ``number_pattern`` reads as ``[NUM]`` stay so.

    Returns:
        ``(tokenizer, added)``: the grown tokenizer (the same object when nothing is
        added) and the tokens added, in id order.
    """
    from headwise.text.char_level import train_char_tokenizer

    backend = tokenizer.backend
    unk = tokenizer.unk_token_id
    number = re.compile(tokenizer.number_pattern) if tokenizer.number_pattern else None
    unknown: Counter[str] = Counter()
    seen: dict[str, bool] = {}
    for text in texts:
        normal = backend.normalizer.normalize_str(text) if backend.normalizer else text
        pieces = backend.pre_tokenizer.pre_tokenize_str(normal) if backend.pre_tokenizer \
            else [(normal, (0, len(normal)))]
        for piece, _ in pieces:
            if piece not in seen:
                seen[piece] = (number is None or not number.fullmatch(piece)) and any(
                    t.id == unk for t in backend.model.tokenize(piece))
            if seen[piece]:
                unknown[piece] += 1
    if not unknown:
        return tokenizer, []
    words = [w for w, n in unknown.items() for _ in range(n)]
    if kind == "char":
        learnt = train_char_tokenizer(words, max_vocab=vocab_size)
    else:
        learnt = Tokenizer.train_wordpiece(words, vocab_size, min_frequency=1)
    state = json.loads(backend.to_str())
    vocab: dict[str, int] = state["model"]["vocab"]
    special = set(tokenizer.special_tokens.values())
    new_vocab = learnt.backend.get_vocab()
    added = [t for t, _ in sorted(new_vocab.items(), key=lambda kv: kv[1])
             if t not in vocab and t not in special]
    if not added:
        return tokenizer, []
    next_id = max(vocab.values()) + 1
    for i, token in enumerate(added):
        vocab[token] = next_id + i
    from tokenizers import Tokenizer as Backend

    return tokenizer.with_backend(Backend.from_str(json.dumps(state))), added


# --- the lineage ----------------------------------------------------------------------------
def model_identity(directory: str | Path) -> str:
    """The SHA-256 identity of a saved model: of its kind's metadata file and its weights
    files (``*.safetensors``, ``*.npz``, ``*.npy``; an ensemble's members too), each hashed
    with its name, in name order. Files written after the model (an evaluation, an ONNX
    export, ``train_summary.json``) do not change it; recalibrating (``headwise
    calibrate``) does, since the decisions change.

    Raises:
        FileNotFoundError: no saved model in ``directory``.
    """
    directory = Path(directory)
    marker = kind_of(directory).marker
    files = [directory / marker] + sorted(
        p for p in directory.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES
        and not any(part.startswith(("eval-", "checkpoints")) for part in
                    p.relative_to(directory).parts[:-1]))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(directory)).encode("utf-8") + b"\0")
        hash_file_into(digest, path)
    return digest.hexdigest()


def rows_sha256(texts: Sequence[str], labels: Sequence[Any]) -> str:
    """The SHA-256 of training rows (text and label, as JSON lines): what a run read when
    it was given rows rather than files."""
    digest = hashlib.sha256()
    for text, label in zip(texts, labels, strict=True):
        digest.update(json.dumps([text, label], ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def lineage_record(start: WarmStart, *, kind: str, parent_labels: Sequence[str],
                   labels: Sequence[str], train_rows: int, rows_digest: str,
                   added_tokens: int = 0, parent_info: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """``info["lineage"]`` of a warm-started model: the parent (its resolved directory, its
    :func:`model_identity`, its kind, the lineage it had), the replay share, the intents
    added, the vocabulary tokens added, the rows trained on and the SHA-256 of the data
    files and rows."""
    new = [y for y in labels if y not in set(parent_labels)]
    return {"parent": str(start.parent.resolve()), "parent_id": model_identity(start.parent),
            "parent_kind": kind, "replay": float(start.replay),
            "refit": kind == "tfidf", "intents_added": new, "tokens_added": int(added_tokens),
            "train_rows": int(train_rows), "train_rows_sha256": rows_digest,
            "data": [{"path": str(p), "sha256": file_sha256(p)} for p in start.data_files],
            "parent_lineage": (parent_info or {}).get("lineage")}


def lineage_of(directory: str | Path) -> dict[str, Any] | None:
    """The lineage a saved model records (``info["lineage"]`` of its metadata file), None
    for a model trained from scratch. Reads the metadata only, not the weights."""
    return (_metadata(Path(directory)).get("info") or {}).get("lineage")


def _metadata(directory: Path) -> dict[str, Any]:
    path = directory / kind_of(directory).marker
    return json.loads(path.read_text(encoding="utf-8"))



def warm_network(parent: Any, recipe: Any, texts: Sequence[str], intents: Sequence[str],
                 run_dir: Path, *, resume: bool = False, tags: Sequence[str] | None = None
                 ) -> tuple[nn.Module, Tokenizer, list[str]]:
    """Stage 2 of a warm start: the parent's network grown for ``intents`` (and a compound
    model's slot ``tags``), with its tokenizer: a pretrained encoder's as it is, a
    from-scratch network's grown for ``texts`` (:func:`grow_tokenizer`) and saved in
    ``run_dir/tokenizer``, where a resumed run reads it back (as a fresh run's).

    Args:
        parent: the loaded parent (an ``IntentClassifier`` or ``CompoundClassifier``).
        recipe: the warm start's :class:`~headwise.intent.training.recipe.IntentRecipe`.
        texts: the training texts.
        intents: the grown intents (:func:`grown_intents`).
        run_dir: the run's checkpoint directory.
        resume: read the grown tokenizer saved there.
        tags: a compound model's grown BIO tags.

    Returns:
        ``(model, tokenizer, added_tokens)``.
    """
    tokenizer = parent.tokenizer
    added: list[str] = []
    saved = Path(run_dir) / "tokenizer"
    if recipe.architecture_name in ("transformer", "bilstm"):
        if resume and saved.is_dir():
            grown = Tokenizer.from_file(saved)
            added = [t for t, i in sorted(grown.backend.get_vocab().items(), key=lambda kv: kv[1])
                     if i >= tokenizer.vocab_size]
            tokenizer = grown
        else:
            kind = recipe.architecture.tokenizer
            if kind == "auto":
                kind = "char" if tokenizer.number_pattern else "wordpiece"
            tokenizer, added = grow_tokenizer(tokenizer, texts, kind=kind,
                                              vocab_size=recipe.architecture.vocab_size)
            tokenizer.save(saved)
    model = copy.deepcopy(parent.model).cpu()
    undo_prior_correction(model, parent.info)
    old_labels = list(getattr(parent, "intents", None) or parent.labels)
    old_tags = list(getattr(model.config, "slot_tags", None) or []) \
        if isinstance(model.config, ModelConfig) else []
    # a pretrained encoder keeps its embedding as it is: its config may hold more rows than
    # its tokenizer has ids (multilingual-e5-small: 250037 rows, 250002 ids)
    grown_model = grow_network(model, old_labels, intents,
                               vocab_size=tokenizer.vocab_size if added else None,
                               old_tags=old_tags, tags=tags)
    return grown_model.train(), tokenizer, added

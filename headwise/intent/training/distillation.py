"""Distillation: train a small, fast student on a trained classifier's soft labels.

A fine-tuned 12-layer encoder is the strongest model and several times slower than a small
Transformer; :func:`distill` trains the small one to answer as the big one does (Hinton et
al. 2015), behind ``headwise distill``::

    run = distill("runs/e5", train, valid, student="truncate:3", unlabelled=texts,
                  augment=["typo", "width"], out_dir="runs/student")

* **Soft targets**: the teacher's calibrated probabilities of every training text (and of
  each unlabelled text and augmented copy) are computed once, batched, and cached in the
  output directory (``teacher_targets.json`` + ``teacher_targets.safetensors``, keyed by
  text and by the teacher's fingerprint: :mod:`~headwise.intent.training.teacher`), so a
  resumed run reads them back instead of running the teacher again. The student learns
  from them through :func:`~headwise.intent.training.losses.distillation_loss`: ``T**2``
  times the KL divergence at temperature ``T``, mixed with the gold label's cross-entropy
  (``alpha``: the soft term's share) on labelled rows, alone on rows without a label.
* **Unlabelled texts** (a production log, say) are rows with a soft target and no label;
  those equal to a training or validation text are left out (the validation data must stay
  unseen).
* **Augmentation** (:mod:`~headwise.intent.training.augmentation`, :data:`AUGMENTATIONS`):
  label-preserving character noise of the kinds customers type -- pinyin-input typos
  (:data:`headwise.text.typos.TYPOS`), a dropped or doubled character, full-width
  and half-width forms, spaces, punctuation -- added as extra rows whose soft target is the
  teacher's on the noisy text. Digits and negation cues (不, 没, "not", ...) are never
  touched: they decide intents.
* **Students** (:data:`STUDENTS`): ``"transformer"`` (from scratch; characters for Chinese,
  with the tokenizer it trains, as ``headwise train --model transformer``), ``"bilstm"``
  (the baseline), or ``"truncate:K"``: the teacher's embeddings and first ``K`` encoder
  layers, its pooling and head (:func:`truncated_student`), fine-tuned as a pretrained
  encoder with its vocabulary trimmed to the texts' tokens plus the recipe's reserve
  (``trim_vocab``).

Training is :func:`~headwise.intent.training.pipeline.train_intent_classifier`'s (the Trainer's
progress bars, atomic checkpoints, exact resume and seeded determinism), with the soft
targets passed in (``soft_targets``); the student is a normal classifier: calibrated and
thresholded on the validation data, exported to ONNX, served and predicted as any other.
Its ``info["distill"]`` names the teacher (path, model, SHA-256 fingerprint) and the
settings (``T``, ``alpha``, unlabelled rows, augmentation).

**A compound teacher** (a :class:`~headwise.intent.compound.classifier.CompoundClassifier`:
several intents per text and slots) trains a compound student (``"transformer"``: the
joint Transformer, ``"bilstm"``: the joint BiLSTM) on annotated examples: every intent's
target is the gold intent mixed with the teacher's sigmoid probability by
``levers.distill_weight`` (soft binary cross-entropy targets,
:func:`~headwise.intent.training.compound.distilled_targets`; the recipe gets
``levers.distill="teacher"`` and the multi-label task), the slot tagger learns the gold
tags; unlabelled texts and noisy copies learn the teacher's probabilities alone. Its
thresholds are tuned on the validation rows, as ``headwise train``'s compound models'. The
teacher should be the strongest compound model at hand (a fine-tuned pretrained encoder,
a soup): the student can only approach it.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from torch import nn

from headwise.intent.answering import ProbabilityClassifier
from headwise.intent.classifier import IntentClassifier
from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.training.augmentation import (
    augmented_rows,
    check_augmentations,
)
from headwise.intent.training.compound import compound_data
from headwise.intent.training.data import in_scope, texts_and_labels, validation_split
from headwise.intent.training.losses import SoftTargets
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import (
    IntentRecipe,
    PretrainedEncoder,
    SingleLabel,
    Transformer,
    architecture_from_spec,
    default_train,
)
from headwise.intent.training.result import TrainedIntent
from headwise.intent.training.teacher import (
    STUDENT_INIT,
    TARGETS_FILE,
    cached_teacher_logits,
    load_teacher,
    teacher_identity,
)
from headwise.loading import save_pretrained
from headwise.models.config import ModelConfig
from headwise.models.encoder import EncoderClassifier
from headwise.models.registry import build_model
from headwise.text.dataset import Dataset, Example

__all__ = ["DEFAULT_ALPHA", "DEFAULT_TEMPERATURE", "STUDENTS", "distill", "parse_student",
           "teacher_network", "truncated_student"]

#: the students :func:`distill` trains (``"truncate:K"``: the teacher's first K layers)
STUDENTS = ("transformer", "bilstm", "truncate:K")
#: the single-label soft term's settings, when not given (a compound teacher takes neither)
DEFAULT_TEMPERATURE, DEFAULT_ALPHA = 2.0, 0.5



# -- students ----------------------------------------------------------------------------------
def parse_student(spec: str) -> tuple[str, int | None]:
    """``("transformer" | "bilstm", None)`` or ``("truncate", K)`` from a student spec.

    Raises:
        ValueError: another spec, or a ``K`` that is not a positive integer (named).
    """
    if spec in ("transformer", "bilstm"):
        return spec, None
    name, _, k = spec.partition(":")
    if name == "truncate":
        if not k.isdigit() or int(k) < 1:
            raise ValueError(f"student truncate:K needs a positive number of layers K, got "
                             f"{spec!r}")
        return "truncate", int(k)
    raise ValueError(f"student must be transformer, bilstm or truncate:K, got {spec!r}")


def teacher_network(teacher: Any) -> Any:
    """The Transformer-encoder network a ``truncate:K`` student is cut from: the teacher
    itself, or the one such member of an ensemble teacher (a network blended with TF-IDF,
    ``levers.blend="tfidf"``, whose probabilities stay the soft targets).

    Raises:
        ValueError: an ensemble with no such member, or with several.
    """
    members = getattr(teacher, "members", None)
    if members is None:
        return teacher
    networks = [m for m in members if isinstance(getattr(m, "model", None), EncoderClassifier)]
    if len(networks) != 1:
        raise ValueError(f"student truncate:K of an ensemble teacher needs exactly one "
                         f"Transformer-encoder member to cut; this one has {len(networks)}")
    return networks[0]


def truncated_student(teacher: IntentClassifier, layers: int) -> nn.Module:
    """A copy of the teacher's network that keeps its embeddings, its first ``layers``
    encoder layers (their number and negation biases too), its final norm (pre-norm
    stacks), pooling and head: the hidden states of the copy are the teacher's after
    ``layers`` layers, and its vocabulary (trimmed or not) is the teacher's. An ensemble
    teacher's network is its Transformer-encoder member (:func:`teacher_network`).

    Raises:
        ValueError: a teacher that is not (or holds no single) Transformer-encoder network,
            or ``layers`` outside ``1..`` the teacher's layers.
    """
    model = getattr(teacher_network(teacher), "model", None)
    if not isinstance(model, EncoderClassifier) or not isinstance(model.config, ModelConfig):
        what = type(model).__name__ if model is not None else type(teacher).__name__
        raise ValueError(f"student truncate:K needs a Transformer-encoder teacher; this one "
                         f"is a {what}")
    total = model.config.num_layers
    if not 1 <= layers <= total:
        raise ValueError(f"student truncate:{layers}: the teacher has {total} encoder layers, "
                         f"so K must be in 1..{total}")
    student = build_model(model.config.replace(num_layers=layers))
    state = model.state_dict()
    wanted = student.state_dict()
    missing = [k for k in wanted if k not in state]
    if missing:
        raise ValueError(f"the teacher's weights lack {missing[:3]} of the truncated model")
    student.load_state_dict({k: state[k].detach().clone() for k in wanted}, strict=True)
    param = next(model.parameters())
    return student.to(device=param.device, dtype=param.dtype).eval()


# -- the whole job ------------------------------------------------------------------------------
def _student_recipe(recipe: IntentRecipe | dict[str, Any] | None, model: str,
                    compound: bool = False) -> IntentRecipe:
    """The student's recipe: ``recipe`` (or its parts, as a ``--config`` file) with the
    student's architecture ``model`` (a ``--model`` value); a recipe naming another
    architecture (than the default, for a recipe object) is refused, since the student
    decides it. A recipe object's ``train`` fields at its architecture's defaults take the
    student's. A ``compound`` teacher's student gets the multi-label task (a single-label
    one left at its defaults becomes it) and ``levers.distill="teacher"``.

    Raises:
        ValueError: another architecture named; for a compound teacher, a single-label
            task with settings of its own.
    """
    if isinstance(recipe, IntentRecipe):
        data = recipe.to_dict()
        base = default_train(recipe.architecture).to_dict()
        data["train"] = {k: v for k, v in data["train"].items() if v != base[k]}
        if recipe.architecture == Transformer():
            del data["architecture"]
    else:
        data = {k: dict(v) if isinstance(v, dict) else v for k, v in (recipe or {}).items()}
    part = dict(data.get("architecture") or {})
    student = architecture_from_spec(model)
    named = part.get("type")
    if named is not None and (named != student.NAME or part.get("name", _student_name(student))
                              != _student_name(student)):
        raise ValueError(f"the recipe's architecture {named!r} is not used: the student "
                         f"(--student) decides the architecture; remove it from the recipe")
    part.update(type=student.NAME, **({"name": student.name}
                                       if isinstance(student, PretrainedEncoder) else {}))
    if compound:
        task = dict(data.get("task") or {})
        if task.get("type", SingleLabel.NAME) == SingleLabel.NAME:
            own = {k: v for k, v in task.items() if k != "type"
                   and v != getattr(SingleLabel(), k, None)}
            if own:
                raise ValueError(f"task.{next(iter(own))} is a single-label task's: a compound "
                                 f"teacher's student is multi_label (several intents + slots)")
            task = {"type": "multi_label"}
        levers = dict(data.get("levers") or {})
        if levers.get("distill", "none") == "none":
            levers["distill"] = "teacher"
        data = {**data, "task": task, "levers": levers}
    return IntentRecipe.from_dict({**data, "architecture": part})


def _student_name(part: Any) -> str | None:
    """A pretrained student's checkpoint name (None for the others)."""
    return part.name if isinstance(part, PretrainedEncoder) else None


def distill(teacher: str | Path | ProbabilityClassifier, train: Any, valid: Any = None, *,
            out_dir: str | Path, student: str = "transformer",
            recipe: IntentRecipe | dict[str, Any] | None = None,
            temperature: float | None = None, alpha: float | None = None,
            unlabelled: Sequence[str] = (), augment: Sequence[str] = (),
            augment_copies: int = 1, teacher_batch_size: int = 64, resume: bool = False,
            keep_checkpoints: bool = False, report: Callable[[str], None] | None = None
            ) -> TrainedIntent:
    """Distil ``teacher`` into a ``student``, then calibrate and save it (``headwise
    distill``).

    A compound teacher trains a compound student (see the module's notes): ``train`` and
    ``valid`` are annotated examples, ``levers.distill_weight`` of the recipe mixes the
    teacher's probabilities into the targets, and neither ``temperature`` nor ``alpha``
    applies.

    Args:
        teacher: a saved classifier's directory (a network, a TF-IDF model, an ensemble or
            a compound model), or a loaded one (then its fingerprint is unknown: None).
        train: labelled training data (a reader ``Dataset`` or (text, label) pairs; its
            out-of-scope rows are left out); every label must be one of the teacher's. A
            compound teacher: annotated examples (a ``Dataset`` or a list of
            ``Example``).
        valid: validation data (early stopping, calibration, the out-of-scope threshold);
            default: a stratified ``recipe.valid_fraction`` of ``train``, held out before
            augmentation, so no noisy copy of a validation text is trained on.
        out_dir: where the student is saved (with the soft-target cache and, while
            training, ``checkpoints/``).
        student: ``"transformer"``, ``"bilstm"`` or ``"truncate:K"`` (:data:`STUDENTS`;
            a compound teacher: ``"transformer"`` or ``"bilstm"``).
        recipe: the student's :class:`~headwise.intent.training.recipe.IntentRecipe`, or its
            parts as a dict (a ``--config`` file's shape; its ``architecture`` may hold the
            fields of the student's architecture, a BiLSTM's or a pretrained encoder's,
            without a ``type``); the student decides the architecture (another one is
            refused).
        temperature: ``T`` > 0 of the soft term (None: 2; a single-label teacher's).
        alpha: the soft term's share of a labelled row's loss, in [0, 1] (None: 0.5; a
            single-label teacher's).
        unlabelled: texts without labels, learnt from the soft targets alone.
        augment: augmentation kinds (:data:`AUGMENTATIONS`, or ``"all"``), for noisy copies
            of the training and unlabelled texts.
        augment_copies: noisy copies per text.
        teacher_batch_size: texts per forward pass of the teacher.
        resume: continue an interrupted run in ``out_dir`` (the soft targets are read from
            its cache, the training from its last checkpoint).
        keep_checkpoints: keep the training checkpoints (and a truncated student's
            starting weights).
        report: called with one-line notes (teacher, soft targets, augmentation, and the
            training's own).

    Returns:
        The :class:`~headwise.intent.training.result.TrainedIntent` of the student.

    Raises:
        ValueError: a bad option (named), a truncated student of a teacher that is no
            single-label Transformer encoder, training intents the teacher does not know,
            or ``temperature`` / ``alpha`` with a compound teacher.
        TypeError: a compound teacher's training rows that are not annotated examples.
        FileNotFoundError: no classifier in the teacher's directory.
    """
    if temperature is not None and not temperature > 0:
        raise ValueError(f"temperature (--temperature) must be positive, got {temperature}")
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha (--alpha) must be in [0, 1], got {alpha}")
    if teacher_batch_size < 1:
        raise ValueError(f"teacher batch size must be at least 1, got {teacher_batch_size}")
    kinds = check_augmentations(augment)
    if augment_copies < 1:
        raise ValueError(f"augment copies (--augment KINDS:N) must be at least 1, got "
                         f"{augment_copies}")
    architecture, layers = parse_student(student)
    out_dir = Path(out_dir)
    teacher_dir = None if isinstance(teacher, ProbabilityClassifier | CompoundClassifier) \
        else Path(teacher)
    if teacher_dir is not None and out_dir.resolve() == teacher_dir.resolve():
        raise ValueError(f"--out {out_dir} is the teacher's directory; save the student "
                         f"elsewhere")
    clf = load_teacher(teacher_dir) if teacher_dir is not None else teacher
    identity = teacher_identity(clf, teacher_dir)
    if report is not None:
        report(f"teacher: {identity['path'] or type(clf).__name__} ({identity['model']}, "
               f"{identity['intents']} intents"
               + (f", sha256 {identity['sha256'][:12]}" if identity["sha256"] else "") + ")")
    if isinstance(clf, CompoundClassifier):
        given = [n for n, v in (("temperature (--temperature)", temperature),
                                ("alpha (--alpha)", alpha)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} is a single-label teacher's soft term; a compound "
                             f"teacher's per-intent probabilities are mixed into the "
                             f"student's targets by levers.distill_weight (--set "
                             f"levers.distill_weight=W)")
        if architecture == "truncate":
            raise ValueError("student truncate:K keeps a single-label Transformer teacher's "
                             "first layers; a compound teacher's student is transformer or "
                             "bilstm (a joint intent + slot network)")
        return _distill_compound(
            clf, identity, train, valid, out_dir=out_dir, student=student,
            recipe=_student_recipe(recipe, architecture, compound=True),
            unlabelled=unlabelled, kinds=kinds, augment_copies=augment_copies,
            teacher_batch_size=teacher_batch_size, resume=resume,
            keep_checkpoints=keep_checkpoints, report=report)
    temperature = DEFAULT_TEMPERATURE if temperature is None else temperature
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    init_dir = out_dir / STUDENT_INIT
    recipe = _student_recipe(recipe, f"pretrained:{init_dir}" if architecture == "truncate"
                             else architecture)
    if architecture == "truncate" and recipe.levers.linear_probe is None:  # the teacher's head
        recipe = recipe.replace(levers__linear_probe=False)
    init = truncated_student(clf, layers) if architecture == "truncate" else None  # checked early

    texts, labels = in_scope(*texts_and_labels(train), "training")
    _require_teacher_intents(labels, clf.labels)
    split = None
    if valid is None:  # held out here, before the noisy copies are made
        split = recipe.valid_fraction
        texts, v_texts, labels, v_labels = validation_split(texts, labels, split,
                                                            recipe.train.seed)
        recipe = dataclasses.replace(recipe, valid_fraction=IntentRecipe.valid_fraction)
        valid = list(zip(v_texts, v_labels, strict=True))
    else:
        v_texts = texts_and_labels(valid)[0]
    held_out = set(v_texts)
    logits, stats, targets, pool, dropped, aug, per_kind = _teacher_logits(
        clf, identity, out_dir, list(zip(texts, labels, strict=True)), held_out,
        unlabelled=unlabelled, kinds=kinds, augment_copies=augment_copies, recipe=recipe,
        teacher_batch_size=teacher_batch_size, report=report)
    info = {"teacher": identity, "student": student, "temperature": temperature,
            "alpha": alpha, "labelled": len(texts), "unlabelled": len(pool),
            "unlabelled_left_out": dict(dropped) or None,
            "augmentation": {"kinds": kinds, "copies": augment_copies, "rows": len(aug),
                             "per_kind": per_kind} if kinds else None,
            "soft_targets": stats, "valid_split": split}
    soft = SoftTargets(labels=list(clf.labels), texts=targets, logits=logits,
                       extra=[(t, None) for t in pool] + aug, temperature=temperature,
                       alpha=alpha, info=info)
    if init is not None:  # rebuilt on resume too: the truncation is deterministic
        save_pretrained(init.float().cpu(), teacher_network(clf).tokenizer, init_dir)
    result = train_intent_classifier(list(zip(texts, labels, strict=True)), valid, recipe,
                                     out_dir=out_dir, resume=resume,
                                     keep_checkpoints=keep_checkpoints, report=report,
                                     soft_targets=soft)
    if init is not None and not keep_checkpoints:
        shutil.rmtree(init_dir, ignore_errors=True)
    return result


def _require_teacher_intents(gold: Iterable[str], teacher: Sequence[str]) -> None:
    """Refuse training intents the teacher does not know (the student predicts the
    teacher's intents).

    Raises:
        ValueError: naming how many and the first few.
    """
    unknown = sorted(set(gold) - set(teacher))
    if unknown:
        raise ValueError(f"{len(unknown)} training intents are not the teacher's: "
                         f"{unknown[:5]}; the student predicts the teacher's intents")


def _teacher_logits(clf: Any, identity: dict[str, Any], out_dir: Path,
                    labelled: list[tuple[str, str | None]], held_out: set[str], *,
                    unlabelled: Sequence[str], kinds: list[str], augment_copies: int,
                    recipe: IntentRecipe, teacher_batch_size: int,
                    report: Callable[[str], None] | None
                    ) -> tuple[Any, Any, list[str], list[str], Counter[str],
                               list[tuple[str, str | None]], dict[str, int]]:
    """What the teacher answers for a student, and its cached logits of each text: the
    labelled texts (``(text, label or None)``, in order), the unlabelled pool
    (:func:`_unlabelled_pool`) and the noisy copies of both (``kinds``). Returns the logits,
    the cache's statistics, the texts they are of, the pool, what was left out of it, the
    copies and their count per kind."""
    texts = [t for t, _ in labelled]
    pool, dropped = _unlabelled_pool(unlabelled, set(texts), held_out)
    aug, per_kind = augmented_rows(
        labelled + [(t, None) for t in pool], kinds, copies=augment_copies,
        seed=recipe.train.seed, exclude=set(texts) | set(pool) | held_out) \
        if kinds else ([], {})
    targets = list(dict.fromkeys([*texts, *pool, *(t for t, _ in aug)]))
    logits, stats = cached_teacher_logits(out_dir, clf, identity, targets,
                                          batch_size=teacher_batch_size,
                                          progress=recipe.train.progress)
    if report is not None:
        _report_targets(report, out_dir, stats, unlabelled, pool, dropped, kinds, aug,
                        per_kind)
    return logits, stats, targets, pool, dropped, aug, per_kind


def _unlabelled_pool(unlabelled: Sequence[str], labelled: set[str], held_out: set[str]
                     ) -> tuple[list[str], Counter[str]]:
    """The unlabelled texts a student learns from (stripped, each once) and how many were
    left out, by why: blank, a training text, a validation text (it must stay unseen).

    Raises:
        TypeError: an item that is not a string.
    """
    bad = next((i for i, t in enumerate(unlabelled) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"unlabelled[{bad}] is {type(unlabelled[bad]).__name__}, not str")
    pool, dropped = [], Counter()
    for t in dict.fromkeys(t.strip() for t in unlabelled):
        if not t:
            dropped["blank"] += 1
        elif t in labelled:
            dropped["a training text"] += 1
        elif t in held_out:
            dropped["a validation text"] += 1
        else:
            pool.append(t)
    return pool, dropped


def _report_targets(report: Callable[[str], None], out_dir: Path, stats: dict[str, Any],
                    unlabelled: Sequence[str], pool: list[str], dropped: Counter[str],
                    kinds: list[str], aug: list[tuple[str, str | None]],
                    per_kind: dict[str, int]) -> None:
    """The notes on the soft targets, the unlabelled texts and the noisy copies."""
    report(f"soft targets: {stats['rows']} texts ({stats['computed']} computed in "
           f"{stats['seconds']:.1f} s, {stats['reused']} read from {out_dir / TARGETS_FILE})")
    if unlabelled:
        report(f"unlabelled texts: {len(pool)} used"
               + "".join(f", {n} left out ({why})" for why, n in dropped.items()))
    if kinds:
        report(f"augmentation: {len(aug)} noisy copies ("
               + ", ".join(f"{k} {n}" for k, n in per_kind.items()) + ")")


def _annotated(rows: Any, what: str) -> tuple[list[Example], Dataset | None]:
    """``rows`` (a ``Dataset`` or annotated examples) as a list, and the dataset
    when it is one.

    Raises:
        TypeError: a row that is not an ``Example``.
    """
    dataset = rows if isinstance(rows, Dataset) else None
    examples = list(rows.examples if dataset is not None else rows)
    bad = next((i for i, e in enumerate(examples) if not isinstance(e, Example)), None)
    if bad is not None:
        raise TypeError(f"a compound teacher's student learns from annotated examples (text, "
                        f"intents, slots); {what} row {bad} is a "
                        f"{type(examples[bad]).__name__}")
    return examples, dataset


def _distill_compound(clf: CompoundClassifier, identity: dict[str, Any], train: Any,
                      valid: Any, *, out_dir: Path, student: str, recipe: IntentRecipe,
                      unlabelled: Sequence[str], kinds: list[str], augment_copies: int,
                      teacher_batch_size: int, resume: bool, keep_checkpoints: bool,
                      report: Callable[[str], None] | None) -> TrainedIntent:
    """:func:`distill` with a compound teacher: the rows, the teacher's per-intent
    probabilities (cached as a single-label teacher's), and the multi-label run with them
    (:func:`~headwise.intent.training.compound.train_compound`)."""
    examples, dataset = _annotated(train, "training")
    _require_teacher_intents((i for e in examples for i in e.intents), clf.intents)
    split = None
    if valid is None:  # held out here, before the noisy copies are made
        split = recipe.valid_fraction
        parts = compound_data(examples, None, recipe)
        examples, valid_rows = parts.train, parts.valid
        recipe = dataclasses.replace(recipe, valid_fraction=IntentRecipe.valid_fraction)
    else:
        valid_rows = _annotated(valid, "validation")[0]
    texts = [e.text for e in examples]
    held_out = {e.text for e in valid_rows}
    logits, stats, targets, pool, dropped, aug, per_kind = _teacher_logits(
        clf, identity, out_dir, [(t, None) for t in dict.fromkeys(texts)], held_out,
        unlabelled=unlabelled, kinds=kinds, augment_copies=augment_copies, recipe=recipe,
        teacher_batch_size=teacher_batch_size, report=report)
    info = {"teacher": identity, "student": student,
            "targets": "per-intent sigmoid probabilities mixed with the gold intents",
            "weight": recipe.levers.distill_weight, "labelled": len(examples),
            "unlabelled": len(pool), "unlabelled_left_out": dict(dropped) or None,
            "augmentation": {"kinds": kinds, "copies": augment_copies, "rows": len(aug),
                             "per_kind": per_kind} if kinds else None,
            "soft_targets": stats, "valid_split": split}
    soft = SoftTargets(labels=list(clf.intents), texts=targets, logits=logits,
                       extra=[(t, None) for t in pool] + aug,
                       alpha=recipe.levers.distill_weight, info=info)
    rows: Any = examples if dataset is None else dataclasses.replace(dataset, examples=examples)
    return train_intent_classifier(rows, valid_rows, recipe, out_dir=out_dir, resume=resume,
                                   keep_checkpoints=keep_checkpoints, report=report,
                                   soft_targets=soft)

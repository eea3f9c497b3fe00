"""Training an intent classifier from a recipe: the stages behind ``headwise train``.

``train_intent_classifier(train, valid, recipe, out_dir=...)`` trains what the recipe's
``task`` says: a multi-label recipe takes the compound branch
(:mod:`headwise.intent.training.compound`); a single-label one runs these stages in order:

1. **data**: the in-scope training rows, the validation rows (given, or a stratified share
   of the training rows; the training data's out-of-scope rows join them, unless outlier
   exposure trains on those), optional label cleaning;
2. **model**: TF-IDF features and a logistic regression (the ``tfidf`` architecture, which then
   skips to 5), or a network: the pretrained encoder with a fresh head and its tokenizer,
   or a tokenizer trained on the texts and a from-scratch Transformer or BiLSTM;
3. **levers**: masked-LM self-pretraining, the linear probe of LP-FT, a teacher's targets;
4. **training**: the project's Trainer (AdamW, warmup + decay, label smoothing, early
   stopping on validation, atomic checkpoints that ``resume=True`` continues from);
5. **decision**: the prior correction, temperature calibration and the out-of-scope
   threshold on the validation rows, the out-of-scope detector, the TF-IDF blend;
6. the saved classifier (:class:`~headwise.intent.classifier.IntentClassifier`,
   :class:`~headwise.intent.tfidf.TfidfClassifier` or, blended,
   :class:`~headwise.intent.ensemble.EnsembleClassifier`).

A warm start (``init_from``, :mod:`headwise.intent.training.warm_start`) changes stages 1
and 2: the intents are the parent's and the new ones, the parent's intents' rows are kept
or replayed in part, and the network is the parent's, grown; the saved model records its
lineage.

What a recipe is (its parts and what each may hold) is
:mod:`headwise.intent.training.recipe`'s; what it builds is
:mod:`headwise.intent.training.builders`'.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from sklearn.model_selection import train_test_split
from torch import nn

from headwise.intent.classifier import IntentClassifier
from headwise.intent.decision.ood.selection import AUTO_MIN_OOS_ROWS, describe_auto
from headwise.intent.decision.oos import ThresholdChoice
from headwise.intent.ensemble import EnsembleClassifier
from headwise.intent.posthoc.prior import correct_on_validation
from headwise.intent.posthoc.recalibration import calibrate_on_validation, fit_ood_detector
from headwise.intent.training.blending import blend_with_tfidf
from headwise.intent.training.builders import (
    build_intent_model,
    describe_pretrained,
    load_pretrained_for_task,
    mark_cue_tokens,
    run_tokenizer,
    train_config,
    with_family_defaults,
)
from headwise.intent.training.cleaning import (
    clean_labels,
    describe_cleaning,
    out_of_fold_probs,
)
from headwise.intent.training.compound import compound_data, train_compound
from headwise.intent.training.data import encode_texts, in_scope, texts_and_labels, validation_split
from headwise.intent.training.defaults import DEFAULT_OUTLIER_EXPOSURE
from headwise.intent.training.linear_probe import fit_linear_probe
from headwise.intent.training.losses import (
    NO_LABEL,
    OUT_OF_SCOPE,
    SmoothedClassification,
    SoftTargets,
    balanced_class_weights,
    validation_metrics,
)
from headwise.intent.training.pretrain import pretrain_encoder
from headwise.intent.training.recipe import IntentRecipe
from headwise.intent.training.result import TrainedIntent
from headwise.intent.training.tfidf_selection import fit_tfidf
from headwise.intent.training.token_dropout import token_dropout_for
from headwise.intent.training.warm_start import (
    WarmStart,
    grown_intents,
    lineage_record,
    replay_sample,
    rows_sha256,
    warm_network,
    warm_recipe,
)
from headwise.text.batching import pad_collate
from headwise.text.labels import OOS_LABEL, OOS_LABELS, is_oos_label, marked_oos
from headwise.text.tokenizer import Tokenizer
from headwise.train import Trainer, load_model_weights

__all__ = ["train_intent_classifier"]


@dataclass
class _Data:
    """Stage 1's output: the rows a training run reads."""

    texts: list[str]
    labels: list[str]
    valid_texts: list[str]
    valid_labels: list[str | None]
    intents: list[str]
    #: a teacher's extra texts (unlabelled, augmented); empty without a teacher
    extra: list[str]
    #: what label cleaning found (None when off)
    cleaning: dict[str, Any] | None
    #: the training data's out-of-scope rows: ``{"rows", "labels", "used",
    #: "outlier_exposure", "auto", "held_out"}`` (``used``: they joined the validation rows,
    #: which happens when those have in-scope rows and outlier exposure is off;
    #: ``outlier_exposure``: its weight, above 0 when they are trained on instead; ``auto``:
    #: the weight is the architecture's default; ``held_out``: with outlier exposure and no
    #: validation data given, how many of them the validation split holds out)
    oos: dict[str, Any]
    #: the out-of-scope texts outlier exposure trains on (empty when it is off)
    outliers: list[str]
    #: a warm start's lineage (``info["lineage"]``; None from scratch)
    lineage: dict[str, Any] | None = None


def train_intent_classifier(train: Any, valid: Any = None, recipe: IntentRecipe | None = None,
                            *, out_dir: str | Path, resume: bool = False,
                            keep_checkpoints: bool = False,
                            report: Callable[[str], None] | None = None,
                            soft_targets: SoftTargets | None = None,
                            init_from: WarmStart | None = None
                            ) -> TrainedIntent:
    """Train, calibrate and save an intent classifier: single-label, or compound (several
    intents + slots) for a recipe whose ``task`` is multi-label.

    Args:
        train: labelled training data (a reader ``Dataset`` or (text, label) pairs).
            Out-of-scope rows (label ``oos``, ..., or ``recipe.decision.oos_labels``) are
            not a class: they join the validation rows for the out-of-scope threshold and
            detector (when those have in-scope rows), as the validation data's own do; with
            ``levers.outlier_exposure`` above 0 the network trains on them instead (a
            uniform answer over the intents) and they choose nothing, except the share the
            validation split holds out of them when ``valid`` is None (``valid_fraction``
            of them, and at least the rows ``ood_detector="auto"`` compares detectors on, up
            to half). That lever's default (None) takes the architecture's measured weight
            when the validation data holds out-of-scope rows too.
            Multi-label: annotated examples (a ``Dataset`` or a list).
        valid: validation data for early stopping, calibration and the out-of-scope
            threshold (its out-of-scope rows are used there), or the compound thresholds;
            default: a stratified ``recipe.valid_fraction`` of ``train``.
        recipe: the :class:`~headwise.intent.training.recipe.IntentRecipe` (default: a
            small single-label Transformer).
        out_dir: the classifier is saved here; training checkpoints go to
            ``out_dir/checkpoints`` (removed after success unless ``keep_checkpoints``).
        resume: continue from the newest checkpoint in ``out_dir/checkpoints``.
        keep_checkpoints: keep the training checkpoints.
        report: called with one-line notes before and during training (the pretrained
            checkpoint's description, trimming, the measured estimate of the training
            time); ``headwise train`` passes ``print``.
        soft_targets: a teacher's targets (:class:`~headwise.intent.training.losses.SoftTargets`,
            from :func:`headwise.intent.training.distillation.distill`): the network gets the
            teacher's intents, learns from the teacher's logits on every row
            (:func:`~headwise.intent.training.losses.distillation_loss`) and from its extra rows
            (unlabelled texts, augmented copies), whose texts also build the tokenizer or
            the kept vocabulary; recorded in ``info["distill"]``. A multi-label recipe
            (``levers.distill="teacher"``) takes a compound teacher's per-intent
            probabilities instead (:func:`~headwise.intent.training.compound.train_compound`).
        init_from: a warm start (:class:`~headwise.intent.training.warm_start.WarmStart`):
            continue from the saved parent model instead of a fresh network (a TF-IDF
            parent is refitted), the recipe's architecture and task the parent's
            (:func:`~headwise.intent.training.warm_start.warm_recipe` builds such a recipe);
            recorded in ``info["lineage"]``.

    Returns:
        The :class:`~headwise.intent.training.result.TrainedIntent` (for a multi-label
        recipe, its ``threshold`` is the tuned per-intent thresholds).

    Raises:
        ValueError: fewer than two intents, or unlabelled rows; ``resume`` or
            ``keep_checkpoints`` for a TF-IDF model (it has no checkpoints), a teacher's
            ``soft_targets`` for a multi-label recipe without ``levers.distill="teacher"`` (or
            that lever without them), or a ``valid_fraction`` other than the
            default beside ``valid``; a warm start whose recipe is not the parent's
            architecture and task, with the linear probe or a teacher, or without a parent
            intent in the data (see :mod:`~headwise.intent.training.warm_start`);
            ``levers.outlier_exposure`` above 0 with no out-of-scope training row, or with
            a teacher's ``soft_targets``.
    """
    recipe = recipe or IntentRecipe()
    parent = None
    if init_from is not None:
        parent, recipe = _warm_parent(init_from, recipe, soft_targets)
    if recipe.architecture_name == "tfidf" and (resume or keep_checkpoints):
        raise ValueError("resume and keep_checkpoints are a network's: a TF-IDF fit has no "
                         "checkpoints")
    if valid is not None and recipe.valid_fraction != IntentRecipe.valid_fraction:
        raise ValueError("valid_fraction is not used when validation data is given: the "
                         "fraction is held out of the training data only without it; remove "
                         "one of the two")
    out_dir = Path(out_dir)
    if recipe.multi_label:
        _check_multi_label_rows(train, "training")
        _check_multi_label_rows(valid or [], "validation")
        return train_compound(compound_data(train, valid, recipe, parent,
                                            1.0 if init_from is None else init_from.replay),
                              recipe,
                              out_dir=out_dir, resume=resume,
                              keep_checkpoints=keep_checkpoints, init_from=init_from,
                              parent=parent, report=report, soft_targets=soft_targets)
    data = _prepare_data(train, valid, recipe, soft_targets, report, init_from, parent)
    if report is not None and data.oos["rows"]:
        report(_describe_oos_rows(data.oos, len(data.intents),
                                  recipe.architecture_name != "tfidf"))
    if recipe.architecture_name == "tfidf":
        return _train_tfidf(recipe, data, out_dir)
    torch.manual_seed(recipe.train.seed)
    model, tokenizer, recipe, pretrained_info = _network(recipe, data, out_dir, resume, report,
                                                         parent)
    index = {name: i for i, name in enumerate(data.intents)}
    levers, decision = recipe.levers, recipe.decision
    max_length = recipe.architecture.max_length
    ids = encode_texts(tokenizer, data.texts, max_length)
    pretrained = None
    if levers.pretrain_epochs:
        base = train_config(recipe, "accuracy")
        pretrained = pretrain_encoder(
            model, tokenizer, ids, dataclasses.replace(
                base, epochs=levers.pretrain_epochs, lr=levers.pretrain_lr or base.lr),
            out_dir=out_dir / "pretrain", probability=levers.pretrain_mask_prob)
    probe = fit_linear_probe(model, ids, [index[y] for y in data.labels], c=levers.probe_c,
                             pad_id=tokenizer.pad_token_id) if recipe.linear_probe else None
    added = [] if data.lineage is None else data.lineage["intents_added"]
    if added and recipe.architecture_name in ("transformer", "pretrained"):
        # a warm start's new intents: their head rows fitted on the parent's features
        # against its rows, kept as they are (a fresh row learns little in a few epochs at
        # a pretrained encoder's fine-tuning rate: BENCHMARKS warm-start:cpu)
        probe = fit_linear_probe(model, ids, [index[y] for y in data.labels],
                                 c=levers.probe_c, pad_id=tokenizer.pad_token_id,
                                 keep=[index[y] for y in data.intents if y not in added])
    train_rows, valid_rows, teacher_weight, distill = _training_rows(
        recipe, data, tokenizer, ids, index, soft_targets)
    weights = (balanced_class_weights([r["labels"] for r in train_rows
                                       if r["labels"] != OUT_OF_SCOPE], len(data.intents))
               if levers.class_weighting == "balanced" else None)
    wrapper = SmoothedClassification(
        model, levers.label_smoothing, weights, levers.gce_q, teacher_weight,
        distill_temperature=None if soft_targets is None else soft_targets.temperature,
        outlier_exposure=data.oos["outlier_exposure"],
        token_dropout=token_dropout_for(tokenizer, levers.token_dropout))
    config = train_config(recipe, recipe.task.select_on)
    ckpt_dir = out_dir / "checkpoints"
    trainer_collate = partial(pad_collate, pad_id=tokenizer.pad_token_id)
    trainer = Trainer(wrapper, config, train_rows, valid_data=valid_rows or None,
                      collate_fn=trainer_collate,
                      evaluate_fn=validation_metrics if valid_rows else None, out_dir=ckpt_dir)
    estimate = trainer.announce(report) if report is not None and not resume else None
    start = time.perf_counter()
    result = trainer.train(resume=resume)
    seconds = time.perf_counter() - start
    if result.best_checkpoint is not None:
        load_model_weights(result.best_checkpoint, wrapper)
    clf = IntentClassifier(wrapper.model.cpu().eval(), tokenizer, data.intents,
                           max_length=max_length)
    # stage 5: how answers are decided, all on the validation rows
    prior = correct_on_validation(clf, data.labels, data.valid_texts, data.valid_labels,
                                  decision.prior_correction)
    choice, metrics = calibrate_on_validation(clf, data.valid_texts, data.valid_labels,
                                              decision.max_reject, decision.reject_budget,
                                              decision.reject_confidence)
    clf.info = {"recipe": recipe.to_dict(), "train_examples": len(data.texts),
                "valid_examples": len(data.valid_texts), "train_seconds": round(seconds, 1),
                "steps": result.steps, "epochs": result.epochs,
                "stopped_early": result.stopped_early, "valid": metrics,
                "pretrain": None if pretrained is None else dataclasses.asdict(pretrained),
                "linear_probe": None if probe is None else dataclasses.asdict(probe),
                "label_cleaning": data.cleaning, "distill": distill, "prior_correction": prior,
                "pretrained": pretrained_info,
                "estimate": None if estimate is None else dataclasses.asdict(estimate),
                "precision": {"precision": trainer.precision.precision,
                              "reason": trainer.precision.reason},
                "oos_threshold": choice.to_dict(), "train_oos": data.oos}
    saved: IntentClassifier | EnsembleClassifier = clf
    if levers.blend == "tfidf":
        saved, choice, metrics = _blend(clf, recipe, data, seconds, report, choice, metrics)
    if saved is clf:  # a blend answers out-of-scope on its own top probability
        detector_choice = fit_ood_detector(
            clf, data.texts, data.labels, data.valid_texts, data.valid_labels,
            decision.ood_detector, max_reject=decision.max_reject,
            reject_budget=decision.reject_budget,
            reject_confidence=decision.reject_confidence)
        if detector_choice is not None:  # the stored detector decides out-of-scope
            choice = detector_choice
        if report is not None and clf.info["ood"].get("auto"):
            report(describe_auto(clf.info["ood"]))
    if data.lineage is not None:  # a blend's info is its own
        saved.info["lineage"] = data.lineage
    saved.save(out_dir)
    if not keep_checkpoints:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return TrainedIntent(saved, out_dir, choice, metrics, result.history, seconds)


# --- stage 1: the data ----------------------------------------------------------------------
def _prepare_data(train: Any, valid: Any, recipe: IntentRecipe,
                  soft_targets: SoftTargets | None,
                  report: Callable[[str], None] | None = None,
                  init_from: WarmStart | None = None, parent: Any = None) -> _Data:
    """The training and validation rows, the intents, a teacher's extra texts and the
    cleaned labels (what cleaning changed told to ``report``); for a warm start, the
    intents grown from the parent's, its intents' training rows replayed and the lineage.

    Raises:
        ValueError: fewer than two intents; blend or ``prior_correction="auto"`` without
            validation rows; outlier exposure without out-of-scope training rows.
    """
    oos_labels = recipe.decision.oos_label_names
    all_texts, all_labels = texts_and_labels(train)
    oos_rows = [(t, str(y).strip()) for t, y in zip(all_texts, all_labels, strict=True)
                if is_oos_label(y, oos_labels)]
    texts, labels = in_scope(all_texts, all_labels, "training", oos_labels)
    intents = sorted(set(labels)) if soft_targets is None else \
        _student_intents(recipe, soft_targets, labels)
    if parent is not None:
        intents = grown_intents(parent.labels, labels, init_from.replay)
    extra = [] if soft_targets is None else [t for t, _ in soft_targets.extra]
    if len(intents) < 2:
        raise ValueError(f"training data must have at least two intents, found {intents}")
    exposure = recipe.levers.outlier_exposure
    if exposure and not oos_rows:
        raise ValueError(f"levers.outlier_exposure={exposure} trains on the training data's "
                         f"out-of-scope rows, and no row is labelled out of scope (the "
                         f"labels read so: {', '.join(OOS_LABELS)}"
                         f"{''.join(f', {x}' for x in oos_labels)}; a data set's own label "
                         f"is decision.oos_labels); add such rows or remove the lever")
    oos_names, held_out = sorted({y for _, y in oos_rows}), 0
    # the architecture's measured weight (never beside a teacher's soft targets)
    default = DEFAULT_OUTLIER_EXPOSURE[recipe.architecture_name] if soft_targets is None else 0.0
    if valid is None:
        texts, v_texts, labels, v_labels = validation_split(texts, labels, recipe.valid_fraction,
                                                           recipe.train.seed)
        wanted = exposure if exposure is not None else default
        if wanted and v_texts and len(oos_rows) >= 2:
            # outlier exposure trains on the rows, so the split holds a share of them out as
            # well, to choose the threshold (and detector) as a validation file's own would:
            # valid_fraction of them, at least the rows auto compares detectors on (up to half)
            share = max(math.ceil(recipe.valid_fraction * len(oos_rows)),
                        min(AUTO_MIN_OOS_ROWS, len(oos_rows) // 2))
            oos_rows, held = train_test_split(oos_rows, test_size=share,
                                              random_state=recipe.train.seed)
            v_texts = list(v_texts) + [t for t, _ in held]
            v_labels = list(v_labels) + [OOS_LABEL] * len(held)
            held_out = len(held)
    else:
        v_texts, v_labels = texts_and_labels(valid)
        v_labels = marked_oos(v_labels, oos_labels)
    if exposure is None:  # the default, where it was measured: validation has such rows too
        measured = bool(oos_rows) and any(is_oos_label(y) for y in v_labels)
        exposure = default if measured else 0.0
    # the training data's out-of-scope rows are never a class: they choose the threshold and
    # the detector beside the validation rows (honest: the model never trained on them), or
    # outlier exposure trains on them, and then they choose nothing (the model has seen them)
    used = bool(oos_rows) and not exposure and any(not is_oos_label(y) for y in v_labels)
    if used:
        v_texts = list(v_texts) + [t for t, _ in oos_rows]
        v_labels = list(v_labels) + [OOS_LABEL] * len(oos_rows)
    oos = {"rows": len(oos_rows) + held_out, "labels": oos_names, "used": used,
           "outlier_exposure": exposure, "auto": recipe.levers.outlier_exposure is None,
           "held_out": held_out}
    outliers = [t for t, _ in oos_rows] if exposure else []
    if recipe.levers.blend != "none" and not v_texts:
        raise ValueError("levers.blend='tfidf' chooses the TF-IDF share on validation data; "
                         "give validation data or a valid_fraction above 0")
    if recipe.decision.prior_correction == "auto" and recipe.architecture_name != "tfidf" \
            and not v_texts:
        raise ValueError("decision.prior_correction='auto' chooses a network's tau on "
                         "validation data; give validation data or a valid_fraction above 0")
    lineage = None
    if parent is not None:
        kept = replay_sample(labels, parent.labels, init_from.replay, recipe.train.seed)
        texts, labels = [texts[i] for i in kept], [labels[i] for i in kept]
        lineage = lineage_record(init_from, kind="tfidf" if recipe.architecture_name == "tfidf"
                                 else "network", parent_labels=parent.labels, labels=intents,
                                 train_rows=len(texts), rows_digest=rows_sha256(all_texts,
                                                                                all_labels),
                                 parent_info=parent.info)
        if report is not None:
            report(_describe_warm_start(lineage, len(parent.labels)))
    cleaning = None
    if recipe.levers.label_cleaning != "none":
        texts, labels, issues = clean_labels(texts, labels, mode=recipe.levers.label_cleaning,
                                             seed=recipe.train.seed)
        cleaning = issues.to_dict()
        if report is not None:
            for line in describe_cleaning(cleaning):
                report(line)
    return _Data(list(texts), list(labels), list(v_texts), list(v_labels), intents, extra,
                 cleaning, oos, outliers, lineage)


def _check_multi_label_rows(rows: Any, what: str) -> None:
    """Refuse a multi-label row whose intents hold an out-of-scope label (``oos`` ...):
    such a row has no intent, as the multi-intent readers give it; a single-label file's
    rows keep their label as written."""
    for e in rows:
        marked = [i for i in e.intents if is_oos_label(i)]
        if marked:
            raise ValueError(f"the {what} data's row at line {e.line} has the out-of-scope "
                             f"label {marked[0]!r} as an intent; a multi-label row out of "
                             f"scope has no intents (read_annotated reads a multi-intent "
                             f"file so; read_examples keeps a single-label file's label)")


def _warm_parent(start: WarmStart, recipe: IntentRecipe, soft_targets: SoftTargets | None
                 ) -> tuple[Any, IntentRecipe]:
    """The loaded parent of a warm start and the recipe to train it with (the linear probe
    off).

    Raises:
        ValueError: a recipe whose architecture or task is not the parent's, the linear
            probe asked for, or a teacher's soft targets.
    """
    if soft_targets is not None:
        raise ValueError("a warm start continues its parent on labelled rows; a teacher's "
                         "soft targets train a student from scratch: use one of the two")
    given = recipe.to_dict()
    if recipe.levers.linear_probe is True:
        raise ValueError("levers.linear_probe fits a fresh head before fine-tuning; a warm "
                         "start keeps its parent's head: remove it from the recipe")
    warm_recipe(start.parent, {"architecture": given["architecture"],
                               "task": {"type": given["task"]["type"]}})
    if recipe.linear_probe:  # a pretrained encoder's default: the parent's head is kept
        recipe = dataclasses.replace(recipe, levers=dataclasses.replace(recipe.levers,
                                                                        linear_probe=False))
    return start.load(), recipe


def _describe_warm_start(lineage: dict[str, Any], parent_intents: int) -> str:
    """One line on a warm start: the parent, what it adds, the rows replayed."""
    how = "refitting a TF-IDF model (it has no state to continue from)" if lineage["refit"] \
        else "continuing"
    added = lineage["intents_added"]
    grows = (f"{parent_intents} intents + {len(added)} new ({', '.join(added[:5])}"
             f"{', ...' if len(added) > 5 else ''})" if added else f"the same {parent_intents} "
             f"intents")
    replay = "" if lineage["replay"] >= 1 else \
        f"; {lineage['replay']:.0%} of the parent's intents' rows replayed"
    return f"warm start from {lineage['parent']}: {how}, {grows}{replay}"


def _describe_oos_rows(oos: dict[str, Any], intents: int, detector: bool) -> str:
    """One line on the training data's out-of-scope rows and the intents left
    (``75 out-of-scope rows (label oos) used for ...; 28 intents``); ``detector``: a
    network's, which also chooses the out-of-scope detector."""
    labels = ", ".join(oos["labels"])
    rows = f"{oos['rows']} out-of-scope row{'s' if oos['rows'] != 1 else ''} (label {labels})"
    if oos["outlier_exposure"]:
        chosen = " (this architecture's default: BENCHMARKS demo:ood)" if oos["auto"] else ""
        held = oos["held_out"]
        if held:
            rows += (f": {held} held out with the validation split, to choose the "
                     f"out-of-scope threshold{' and detector' if detector else ''}; "
                     f"{oos['rows'] - held}")
        return (f"{rows} trained on by outlier exposure (weight {oos['outlier_exposure']:g}"
                f"{chosen}: a uniform answer over the intents), so they choose neither the "
                f"out-of-scope threshold nor the detector (the model has seen them); "
                f"{intents} intents")
    use = (f"used for the out-of-scope threshold{' and detector' if detector else ''}, "
           "beside the validation rows "
           "(not trained on)" if oos["used"] else
           "left out: no in-scope validation rows to choose a threshold against")
    return f"{rows} {use}; {intents} intents"


def _student_intents(recipe: IntentRecipe, soft: SoftTargets, labels: list[str]) -> list[str]:
    """The intents of a student distilled from ``soft``: the teacher's, in its order.

    Raises:
        ValueError: a TF-IDF student, a second teacher (``distill``), ``gce_q``, outlier
            exposure, or gold labels the teacher does not know (named).
    """
    lev = recipe.levers
    if recipe.architecture_name == "tfidf" or lev.distill != "none" or lev.gce_q is not None \
            or lev.blend != "none":
        raise ValueError("a teacher's soft targets train a network (not tfidf) on the "
                         "distillation loss: remove levers.distill, levers.gce_q and "
                         "levers.blend from the recipe")
    if lev.outlier_exposure:
        raise ValueError("levers.outlier_exposure does not combine with a teacher's soft "
                         "targets: the student learns the teacher's distribution on every row "
                         "(and `headwise distill` leaves the out-of-scope rows out); remove "
                         "the lever")
    unknown = sorted(set(labels) - set(soft.labels))
    if unknown:
        raise ValueError(f"{len(unknown)} training intents are not the teacher's: "
                         f"{unknown[:5]}; the student predicts the teacher's intents")
    return list(soft.labels)


# --- stage 2: the model ---------------------------------------------------------------------
def _train_tfidf(recipe: IntentRecipe, data: _Data, out_dir: Path) -> TrainedIntent:
    """The ``tfidf`` architecture: fit (choosing ``C`` when the recipe gives several),
    calibrate on validation, save."""
    start = time.perf_counter()
    decision = recipe.decision
    clf = fit_tfidf(data.texts, data.labels, c=recipe.architecture.c, seed=recipe.train.seed,
                    prior_correction=decision.prior_correction, progress=recipe.train.progress,
                    class_weight=None if recipe.levers.class_weighting == "none" else "balanced")
    seconds = time.perf_counter() - start
    choice, metrics = calibrate_on_validation(clf, data.valid_texts, data.valid_labels,
                                              decision.max_reject, decision.reject_budget,
                                              decision.reject_confidence)
    clf.info.update(recipe=recipe.to_dict(), train_examples=len(data.texts),
                    valid_examples=len(data.valid_texts), train_seconds=round(seconds, 1),
                    valid=metrics, label_cleaning=data.cleaning, oos_threshold=choice.to_dict(),
                    train_oos=data.oos)
    if data.lineage is not None:
        clf.info["lineage"] = data.lineage
    clf.save(out_dir)
    return TrainedIntent(clf, out_dir, choice, metrics, [], seconds)


def _network(recipe: IntentRecipe, data: _Data, out_dir: Path, resume: bool,
             report: Callable[[str], None] | None, parent: Any = None
             ) -> tuple[nn.Module, Tokenizer, IntentRecipe, dict[str, Any] | None]:
    """The network and its tokenizer: the pretrained encoder with a fresh head (and the
    recipe with its family's defaults filled in), a freshly built one, or a warm start's
    parent, grown (its ``pretrained`` record kept).

    Returns:
        ``(model, tokenizer, recipe, pretrained_info)``; ``pretrained_info`` is None for a
        from-scratch network.
    """
    if parent is not None:
        model, tokenizer, added = warm_network(parent, recipe,
                                               data.texts + data.extra + data.outliers,
                                               data.intents, out_dir / "checkpoints",
                                               resume=resume)
        assert data.lineage is not None
        data.lineage["tokens_added"] = len(added)
        if report is not None and added:
            report(f"vocabulary grown by {len(added)} tokens of the new texts "
                   f"({', '.join(added[:8])}{', ...' if len(added) > 8 else ''})")
        mark_cue_tokens(model, tokenizer)
        return model, tokenizer, recipe, parent.info.get("pretrained")
    if recipe.architecture_name == "pretrained":
        model, tokenizer, info = load_pretrained_for_task(
            recipe, data.texts + data.valid_texts + data.extra + data.outliers, data.intents)
        recipe, filled = with_family_defaults(recipe, info["family"])
        if report is not None:
            for line in describe_pretrained(info):
                report(line)
            if filled:
                report(filled)
        return model, tokenizer, recipe, info
    tokenizer = run_tokenizer(data.texts + data.extra + data.outliers, recipe,
                              out_dir / "checkpoints",
                              resume=resume)
    model = build_intent_model(recipe, tokenizer, data.intents)
    mark_cue_tokens(model, tokenizer)
    return model, tokenizer, recipe, None


# --- stage 3: the rows the Trainer reads, with a teacher's targets ---------------------------
def _training_rows(recipe: IntentRecipe, data: _Data, tokenizer: Tokenizer,
                   ids: list[list[int]], index: dict[str, int],
                   soft_targets: SoftTargets | None
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float,
                              dict[str, Any] | None]:
    """The training rows (with the TF-IDF teacher's or ``soft_targets``' targets; outlier
    exposure's out-of-scope rows last, labelled
    :data:`~headwise.intent.training.losses.OUT_OF_SCOPE`) and the validation rows of known
    intents.

    Returns:
        ``(train_rows, valid_rows, teacher_weight, distill_info)``.
    """
    train_rows = [{"input_ids": x, "labels": index[y]}
                  for x, y in zip(ids, data.labels, strict=True)]
    distill = None
    max_length = recipe.architecture.max_length
    if recipe.levers.distill == "tfidf":  # columns: the sorted intents, as `intents`
        start = time.perf_counter()
        teacher, _ = out_of_fold_probs(data.texts, data.labels, seed=recipe.train.seed)
        for row, probs in zip(train_rows, teacher, strict=True):
            row["teacher"] = probs.tolist()
        distill = {"teacher": "tfidf", "seconds": round(time.perf_counter() - start, 1)}
    known = [i for i, y in enumerate(data.valid_labels) if y in index]
    v_ids = encode_texts(tokenizer, [data.valid_texts[i] for i in known], max_length)
    valid_rows = [{"input_ids": x, "labels": index[data.valid_labels[i]]}
                  for x, i in zip(v_ids, known, strict=True)]
    teacher_weight = recipe.levers.distill_weight if recipe.levers.distill != "none" else 0.0
    if soft_targets is not None:  # the teacher's logits on every row; extra rows appended
        x_ids = encode_texts(tokenizer, data.extra, max_length)
        train_rows += [{"input_ids": x, "labels": NO_LABEL if y is None else index[y]}
                       for x, (_, y) in zip(x_ids, soft_targets.extra, strict=True)]
        for row, z in zip(train_rows, soft_targets.logits_for(data.texts + data.extra),
                          strict=True):
            row["teacher"] = z.tolist()
        teacher_weight, distill = soft_targets.alpha, soft_targets.info
    if data.outliers:  # their loss is the exposure term alone: a teacher's row is not read
        placeholder = {"teacher": [1.0 / len(index)] * len(index)} if "teacher" in train_rows[0] \
            else {}
        train_rows += [{"input_ids": x, "labels": OUT_OF_SCOPE, **placeholder}
                       for x in encode_texts(tokenizer, data.outliers, max_length)]
    return train_rows, valid_rows, teacher_weight, distill


# --- stage 5: the TF-IDF blend --------------------------------------------------------------
def _blend(clf: IntentClassifier, recipe: IntentRecipe, data: _Data, seconds: float,
           report: Callable[[str], None] | None, choice: ThresholdChoice,
           metrics: dict[str, float]
           ) -> tuple[IntentClassifier | EnsembleClassifier, ThresholdChoice, dict[str, float]]:
    """The network blended with a TF-IDF model at the share validation chooses (the
    network alone when that is best), with the blend's own threshold.

    Returns:
        ``(classifier to save, threshold choice, validation metrics)``.
    """
    saved, blend, _, tfidf_seconds = blend_with_tfidf(clf, data.texts, data.labels,
                                                      data.valid_texts, data.valid_labels,
                                                      recipe)
    clf.info["blend"] = {**blend.to_dict(), "tfidf_seconds": round(tfidf_seconds, 1)}
    if report is not None:
        report(blend.describe())
    if saved is not clf:  # the blend's own threshold, on the same validation rows
        decision = recipe.decision
        choice, metrics = calibrate_on_validation(saved, data.valid_texts, data.valid_labels,
                                                  decision.max_reject, decision.reject_budget,
                                                  decision.reject_confidence)
        saved.info = {"recipe": recipe.to_dict(), "members": [recipe.architecture.spec, "tfidf"],
                      "blend": clf.info["blend"], "train_examples": len(data.texts),
                      "valid_examples": len(data.valid_texts),
                      "train_seconds": round(seconds + tfidf_seconds, 1),
                      "precision": clf.info.get("precision"),
                      "valid": metrics, "oos_threshold": choice.to_dict(),
                      "label_cleaning": data.cleaning, "train_oos": data.oos}
    return saved, choice, metrics

"""The multi-label branch of :func:`~headwise.intent.training.pipeline.train_intent_classifier`:
a compound (several intents + slots) classifier, one function a stage.

For a recipe whose ``task`` is :class:`~headwise.intent.training.recipe.MultiLabel`
(``headwise train --multi-label``): the data (:func:`compound_data`: annotated examples, a
seeded validation share), the network (:func:`compound_network`: a
:class:`~headwise.models.joint.JointIntentSlotModel` from scratch, a BERT-family encoder
with fresh heads (its intent head then fitted on the frozen encoder by default, LP-FT),
or the BiLSTM baseline
:class:`~headwise.models.lstm_joint.BiLSTMJointModel` with the same heads; its sigmoids
started at the intents' priors), joint training with the
project's Trainer (:func:`train_compound`: early stopping on the mean of intent micro-F1 and
slot-token F1 on validation), the thresholds tuned on validation probabilities
(:func:`tune_compound`), and the saved
:class:`~headwise.intent.compound.classifier.CompoundClassifier`.

Number-aware heads (``architecture.model_overrides["number_heads"] = [0, 1]``) work for the
Transformer and the pretrained encoder (a BiLSTM has no attention heads to bias). Of the
levers the intent head takes ``label_smoothing`` (each sigmoid's target ``y * (1 - eps) +
eps / 2``) and ``class_weighting="balanced"`` (each intent's positives and negatives
weighted to count equally, :func:`~headwise.intent.training.losses.
balanced_multilabel_weights`), through :class:`~headwise.intent.training.losses.
CompoundObjective`; the from-scratch Transformer takes the masked-LM pre-training
(``levers.pretrain_epochs``); the Transformer and the pretrained encoder take LP-FT
(``levers.linear_probe``: the intent head fitted on the frozen encoder's pooled vectors,
one logistic regression per intent,
:func:`~headwise.intent.training.linear_probe.fit_multilabel_probe`, and the slot tagger on
its token states, one multinomial regression over the tags,
:func:`~headwise.intent.training.linear_probe.fit_tag_probe`, before joint training);
after training, ``levers.blend="tfidf"`` blends a one-vs-rest TF-IDF model into the intent
probabilities at the share validation chooses
(:func:`~headwise.intent.training.blending.blend_compound`). The recipe refuses, when built,
what the multi-label task does not use.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise.intent.compound.classifier import CompoundClassifier
from headwise.intent.compound.thresholds import (
    Thresholds,
    decide,
    multilabel_metrics,
    tune_thresholds,
)
from headwise.intent.training.blending import blend_compound
from headwise.intent.training.builders import (
    build_intent_model,
    describe_pretrained,
    load_pretrained_for_task,
    mark_cue_tokens,
    run_tokenizer,
    train_config,
    with_family_defaults,
)
from headwise.intent.training.joins import join_two, joined_pairs
from headwise.intent.training.linear_probe import fit_multilabel_probe, fit_tag_probe
from headwise.intent.training.losses import (
    CompoundObjective,
    SoftTargets,
    balanced_multilabel_weights,
)
from headwise.intent.training.pretrain import pretrain_encoder
from headwise.intent.training.recipe import IntentRecipe, MultiLabel
from headwise.intent.training.result import TrainedIntent
from headwise.intent.training.token_dropout import token_dropout_for
from headwise.intent.training.warm_start import (
    WarmStart,
    grown_intents,
    lineage_record,
    rows_sha256,
    warm_network,
)
from headwise.models.joint import JointIntentSlotModel
from headwise.models.joint_heads import JointHeads
from headwise.text.batching import pad_collate
from headwise.text.bio import bio_tag_names, encode_with_tags
from headwise.text.dataset import Dataset, Example
from headwise.text.number_tokens import whole_number_ids
from headwise.text.tokenizer import Tokenizer
from headwise.train import Trainer, load_model_weights

__all__ = ["compound_data", "compound_network", "compound_targets", "distilled_rows",
           "distilled_targets", "drop_numbers", "encode_rows", "init_prior_bias",
           "joint_validation", "train_compound", "tune_compound"]

#: joint-model parameters a BERT-family checkpoint does not have (fresh at import)
_FRESH = ("tagger.", "classifier.", "encoder.number_bias.", "encoder.is_number_token",
          "encoder.negation_bias.", "encoder.is_negation_token", "encoder.is_clause_break")


@dataclass
class CompoundData:
    """:func:`compound_data`'s output: the rows a multi-label run reads."""

    train: list[Example]
    valid: list[Example]
    intents: list[str]
    slot_names: list[str]
    #: the BIO tag names of the slots (None: no slot tagger)
    tags: list[str] | None
    #: the "today" of the training data's relative dates, when it declares one (the
    #: classifier keeps it)
    reference_date: date | None = None
    #: the SHA-256 of the training examples given, for a warm start's lineage (None from
    #: scratch)
    rows_digest: str | None = None


def compound_data(train: Sequence[Example] | Dataset,
                  valid: Sequence[Example] | None, recipe: IntentRecipe,
                  parent: CompoundClassifier | None = None, replay: float = 1.0
                  ) -> CompoundData:
    """Stage 1: the training and validation examples (a seeded ``valid_fraction`` of
    ``train`` when ``valid`` is None), the intents, the slot names and their tags
    (``task.slots`` off: none). Examples without intents are negatives for every intent.
    The training data's reference date (an
    :class:`~headwise.text.dataset.Dataset`'s ``reference_date``) is kept.

    A warm start's ``parent`` puts its intents first, in its order, and its slot names
    among the data's; of the training examples with only the parent's intents a seeded
    ``replay`` share is kept.

    Raises:
        ValueError: fewer than two intents in the training data; with ``parent``, one of its
            intents missing from the data (replay above 0).
    """
    reference = train.reference_date if isinstance(train, Dataset) else None
    train = list(train)
    digest = rows_sha256([e.text for e in train], [sorted(e.intents) for e in train]) \
        if parent is not None else None
    intents = sorted({i for e in train for i in e.intents})
    if parent is not None:
        intents = grown_intents(parent.intents, [i for e in train for i in e.intents], replay)
    if len(intents) < 2:
        raise ValueError(f"training data must have at least two intents, found {intents}")
    if valid is None:
        train, valid = _split(train, recipe)
    if parent is not None and replay < 1.0:
        known = set(parent.intents)
        old = [e for e in train if e.intents and set(e.intents) <= known]
        new = [e for e in train if not (e.intents and set(e.intents) <= known)]
        keep = random.Random(recipe.train.seed).sample(
            range(len(old)), min(len(old), round(len(old) * replay)))
        train = new + [old[i] for i in sorted(keep)]
    task = recipe.task
    assert isinstance(task, MultiLabel)
    slot_names = sorted({s.name for e in train for s in e.slots}) if task.slots else []
    if parent is not None and task.slots:
        slot_names = sorted(set(slot_names) | set(parent.info.get("slot_names") or []))
    return CompoundData(train, list(valid), intents, slot_names,
                        bio_tag_names(slot_names) if slot_names else None, reference, digest)


def train_compound(data: CompoundData, recipe: IntentRecipe, *, out_dir: Path,
                   resume: bool = False, keep_checkpoints: bool = False,
                   init_from: WarmStart | None = None,
                   parent: CompoundClassifier | None = None,
                   report: Callable[[str], None] | None = None,
                   soft_targets: SoftTargets | None = None) -> TrainedIntent:
    """Stages 2 to 5 of a multi-label run: the network (:func:`compound_network`, or a
    warm start's ``parent`` grown), the optional masked-LM pre-training, joint training,
    the thresholds (:func:`tune_compound`), the optional TF-IDF blend (its share chosen on
    validation, the thresholds tuned again on the blended probabilities), the saved
    classifier (with its lineage after a warm start). ``report`` gets the run's precision
    and its measured duration estimate before training
    (:meth:`headwise.train.Trainer.announce`), as a single-label run's, and the blend's
    choice.

    ``soft_targets`` (with ``levers.distill="teacher"``; built by
    :func:`~headwise.intent.training.distillation.distill` from a compound teacher) hold
    the teacher's per-intent log-probabilities of every text: the student gets the
    teacher's intents in its order, and every training row's intent target is
    :func:`distilled_targets`' mix of the gold intents and the teacher's probabilities;
    its extra rows (unlabelled texts, noisy copies) learn the teacher's probabilities alone
    and no slot tags, and their texts also build the tokenizer (or the kept vocabulary).
    Recorded in ``info["distill"]``.

    Raises:
        ValueError: ``levers.distill="teacher"`` without soft targets or soft targets
            without it, or gold intents the teacher does not know.
    """
    if recipe.levers.blend != "none" and not data.valid:
        raise ValueError("levers.blend='tfidf' chooses the TF-IDF share on validation data; "
                         "give validation rows (--valid or a valid_fraction above 0)")
    if (recipe.levers.distill == "teacher") != (soft_targets is not None):
        raise ValueError("levers.distill='teacher' learns from a compound teacher: run "
                         "`headwise distill TEACHER` (which sets it), not `headwise train`"
                         if soft_targets is None else "a compound teacher's soft targets "
                         "need levers.distill='teacher'")
    if soft_targets is not None:
        unknown = sorted(set(data.intents) - set(soft_targets.labels))
        if unknown:
            raise ValueError(f"{len(unknown)} training intents are not the teacher's: "
                             f"{unknown[:5]}; the student predicts the teacher's intents")
        data = replace(data, intents=list(soft_targets.labels))
    torch.manual_seed(recipe.train.seed)
    if recipe.architecture_name == "pretrained" and parent is None:
        recipe, filled = with_family_defaults(recipe, None)  # the multi-label defaults
        if report is not None and filled:
            report(filled)
    if recipe.levers.linear_probe is None:  # the default, recorded as it was used
        recipe = recipe.replace(levers__linear_probe=recipe.linear_probe)
    if recipe.task.compound_joins is None:  # the architecture's, recorded as it was used
        recipe = recipe.replace(task__compound_joins=recipe.compound_joins)
    lineage = None
    pretrained_info = None if parent is None else parent.info.get("pretrained")
    if parent is not None and init_from is not None:
        model, tokenizer, added = warm_network(parent, recipe, [e.text for e in data.train],
                                               data.intents, out_dir / "checkpoints",
                                               resume=resume, tags=data.tags)
        mark_cue_tokens(model, tokenizer)
        old = len(parent.intents)
        kept = model.classifier.bias[:old].detach().clone()
        init_prior_bias(model, data.train, data.intents)  # the new intents' rows, as fresh
        with torch.no_grad():
            model.classifier.bias[:old] = kept
        lineage = lineage_record(init_from, kind="compound", parent_labels=parent.intents,
                                 labels=data.intents, train_rows=len(data.train),
                                 rows_digest=data.rows_digest or "", added_tokens=len(added),
                                 parent_info=parent.info)
    else:
        extra = [] if soft_targets is None else [t for t, _ in soft_targets.extra]
        model, tokenizer, pretrained_info = compound_network(
            recipe, [e.text for e in data.train] + extra, data.intents, data.tags,
            out_dir / "checkpoints", resume)
        if report is not None and pretrained_info is not None:
            for line in describe_pretrained(pretrained_info):
                report(line)
        init_prior_bias(model, data.train, data.intents)
    tag_index = {t: i for i, t in enumerate(data.tags or [])}
    max_length = recipe.architecture.max_length
    task = recipe.task
    assert isinstance(task, MultiLabel)
    pairs = joined_pairs(data.train, task.compound_joins, recipe.train.seed,
                         fits=tokenizer.lengths, max_length=max_length)
    joins = [join_two(data.train[i], data.train[j], c) for i, j, c in pairs]
    rows = encode_rows(tokenizer, data.train + joins, data.intents, tag_index, max_length)
    levers = recipe.levers
    weights = balanced_multilabel_weights([r["labels"] for r in rows]) \
        if levers.class_weighting == "balanced" else None  # of the gold intents
    gold = [(r["input_ids"], r["labels"]) for r in rows]  # the probe's, before distillation
    tagged = [r for r in rows if "tag_labels" in r]
    distill = None
    if soft_targets is not None:
        rows, distill = distilled_rows(rows, tokenizer, data, soft_targets,
                                       levers.distill_weight, tag_index, max_length, pairs)
    dropped = drop_numbers(rows, tokenizer, task.number_dropout, recipe.train.seed)
    valid_rows = encode_rows(tokenizer, data.valid, data.intents, tag_index, max_length)
    config = train_config(recipe, "score")
    pretrained = None
    if levers.pretrain_epochs:
        pretrained = pretrain_encoder(
            model, tokenizer, [r["input_ids"] for r in rows], replace(
                config, epochs=levers.pretrain_epochs, lr=levers.pretrain_lr or config.lr),
            out_dir=out_dir / "pretrain", probability=levers.pretrain_mask_prob)
    probe = tag_probe = None
    if recipe.linear_probe:
        probe = fit_multilabel_probe(model, [ids for ids, _ in gold], [y for _, y in gold],
                                     pad_id=tokenizer.pad_token_id, c=levers.probe_c,
                                     balanced=levers.class_weighting == "balanced")
        if getattr(model, "tagger", None) is not None:
            tag_probe = fit_tag_probe(model, [r["input_ids"] for r in tagged],
                                      [r["tag_labels"] for r in tagged],
                                      pad_id=tokenizer.pad_token_id, c=levers.probe_c)
    added = [] if lineage is None else lineage["intents_added"]
    old_tags = set(parent.slot_tags) if lineage is not None else set(data.tags or [])
    new_tags = [t for t in data.tags or [] if t not in old_tags]
    if recipe.architecture_name in ("transformer", "pretrained"):
        # a warm start's new intents and new slot tags: their rows fitted on the parent's
        # features, the parent's rows kept (as the single-label warm start; a fresh row
        # barely moves at a fine-tuning rate: BENCHMARKS warm-start:cpu)
        if added:
            probe = fit_multilabel_probe(model, [ids for ids, _ in gold], [y for _, y in gold],
                                         pad_id=tokenizer.pad_token_id, c=levers.probe_c,
                                         balanced=levers.class_weighting == "balanced",
                                         only=[data.intents.index(i) for i in added])
        if new_tags and tagged and getattr(model, "tagger", None) is not None:
            tag_probe = fit_tag_probe(model, [r["input_ids"] for r in tagged],
                                      [r["tag_labels"] for r in tagged],
                                      pad_id=tokenizer.pad_token_id, c=levers.probe_c,
                                      keep=[tag_index[t] for t in old_tags])
    objective = CompoundObjective(model, levers.label_smoothing, weights,
                                  token_dropout_for(tokenizer, levers.token_dropout))
    trainer = Trainer(objective, config, rows, valid_data=valid_rows or None,
                      collate_fn=partial(pad_collate, pad_id=tokenizer.pad_token_id),
                      evaluate_fn=joint_validation if valid_rows else None,
                      out_dir=out_dir / "checkpoints")
    estimate = trainer.announce(report) if report is not None and not resume else None
    start = time.perf_counter()
    result = trainer.train(resume=resume)
    seconds = time.perf_counter() - start
    if result.best_checkpoint is not None:
        load_model_weights(result.best_checkpoint, objective)
    clf = CompoundClassifier(model.cpu().eval(), tokenizer, data.intents, max_length=max_length,
                             reference_date=data.reference_date)
    thresholds, metrics = tune_compound(clf, data.valid, task.per_intent_thresholds,
                                        task.threshold_metric)
    blend = None
    if levers.blend == "tfidf":
        choice, tfidf, tfidf_seconds = blend_compound(
            clf, [e.text for e in data.train], compound_targets(data.train, data.intents),
            [e.text for e in data.valid], compound_targets(data.valid, data.intents), recipe)
        blend = {**choice.to_dict(), "c": tfidf.info["c"],
                 "tfidf_seconds": round(tfidf_seconds, 1), "network_valid": metrics}
        if report is not None:
            report(choice.describe())
        if clf.tfidf is not None:  # the thresholds of the blended probabilities
            thresholds, metrics = tune_compound(clf, data.valid, task.per_intent_thresholds,
                                                task.threshold_metric)
    clf.thresholds = thresholds
    clf.info = {"recipe": recipe.to_dict(), "train_examples": len(data.train),
                "valid_examples": len(data.valid), "slot_names": data.slot_names,
                "train_seconds": round(seconds, 1), "steps": result.steps,
                "epochs": result.epochs, "stopped_early": result.stopped_early,
                "valid": metrics, "numbers_dropped": dropped,
                "joined_rows": len(joins), "pretrained": pretrained_info,
                "pretrain": None if pretrained is None else asdict(pretrained),
                "linear_probe": None if probe is None else {
                    **asdict(probe), "tagger": None if tag_probe is None else asdict(tag_probe)},
                "estimate": None if estimate is None else asdict(estimate),
                "precision": {"precision": trainer.precision.precision,
                              "reason": trainer.precision.reason},
                "objective": {"label_smoothing": levers.label_smoothing,
                              "class_weighting": levers.class_weighting},
                "blend": blend}
    if distill is not None:
        clf.info["distill"] = distill
    if lineage is not None:
        clf.info["lineage"] = lineage
    clf.save(out_dir)
    if not keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    return TrainedIntent(clf, out_dir, thresholds, metrics, result.history, seconds)


def distilled_targets(gold: np.ndarray, teacher: np.ndarray, weight: float) -> np.ndarray:
    """A compound student's intent targets: ``(1 - weight) * gold + weight * teacher``, the
    gold intents (0/1) mixed with the teacher's per-intent probabilities, each in [0, 1].

    Binary cross-entropy is linear in its target, so training on the mix is training on
    ``(1 - weight)`` times the gold intents' loss plus ``weight`` times the loss against
    the teacher's probabilities (Hinton et al. 2015's soft targets, one sigmoid an intent;
    :func:`~headwise.intent.training.losses.multilabel_intent_loss`).

    Raises:
        ValueError: shapes that differ, a weight outside [0, 1] or probabilities outside
            [0, 1].
    """
    gold, teacher = np.asarray(gold, dtype=np.float64), np.asarray(teacher, dtype=np.float64)
    if gold.shape != teacher.shape:
        raise ValueError(f"gold intents {gold.shape} and teacher probabilities "
                         f"{teacher.shape} differ in shape")
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the teacher's weight must be in [0, 1], got {weight}")
    if teacher.size and not (0.0 <= teacher.min() and teacher.max() <= 1.0):
        raise ValueError("the teacher's probabilities must be in [0, 1]")
    return (1.0 - weight) * gold + weight * teacher


def distilled_rows(rows: list[dict[str, Any]], tokenizer: Tokenizer, data: CompoundData,
                   soft: SoftTargets, weight: float, tag_index: dict[str, int],
                   max_length: int, pairs: Sequence[tuple[int, int, str]] = ()
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The training rows of a compound student: the labelled rows with their intent
    targets mixed with the teacher's probabilities (:func:`distilled_targets`; their gold
    slot tags kept), then the soft targets' extra rows (unlabelled texts, noisy copies)
    with the teacher's probabilities as their targets and every tag ignored (-100: no
    gold slots). The teacher's columns are ``soft.labels``, the student's intents.

    ``rows`` are ``data.train``'s rows, then one row per joined pair
    (:func:`~headwise.intent.training.joins.joined_pairs`, indices into ``data.train``):
    a joined text asks what its two parts ask, so the teacher's probability of each intent
    for it is the larger of its parts' (the teacher never read the joined text).

    Returns:
        ``(rows, info)``: ``info`` is ``soft.info`` with the weight and the rows' counts.
    """
    texts = [e.text for e in data.train]
    if len(rows) != len(texts) + len(pairs):
        raise ValueError(f"{len(rows)} rows for {len(texts)} training rows and "
                         f"{len(pairs)} joined pairs")
    extra = [t for t, _ in soft.extra]
    probs = np.exp(soft.logits_for(texts + extra))
    own, rest = probs[:len(texts)], probs[len(texts):]
    joined = [np.maximum(own[i], own[j]) for i, j, _ in pairs]
    teacher = np.concatenate([own, np.array(joined).reshape(len(pairs), own.shape[1])])
    gold = np.array([r["labels"] for r in rows], dtype=np.float64).reshape(len(rows), -1)
    mixed = distilled_targets(gold, teacher, weight)
    out = [{**r, "labels": m.tolist()} for r, m in zip(rows, mixed, strict=True)]
    blank = [Example(t, (), (), 0) for t in extra]
    for r, p in zip(encode_rows(tokenizer, blank, data.intents, tag_index, max_length),
                    rest, strict=True):
        r["labels"] = p.tolist()
        if "tag_labels" in r:
            r["tag_labels"] = [-100] * len(r["tag_labels"])
        out.append(r)
    info = {**soft.info, "weight": weight, "labelled_rows": len(texts),
            "joined_rows": len(pairs), "extra_rows": len(extra)}
    return out, info


def drop_numbers(rows: list[dict[str, Any]], tokenizer: Tokenizer, share: float,
                 seed: int) -> int:
    """Replace a seeded ``share`` of the rows' whole-number tokens by ``[NUM]``, in place;
    return how many were replaced.

    A character tokenizer keeps every number of its training texts in the vocabulary
    (:mod:`headwise.text.char_level`), so ``[NUM]``, which an unseen number (a new card
    tail, an amount never written before) is encoded as, never occurs in training and its
    embedding stays at its random start: the slot tagger cannot find the unseen number.
    Replacing some numbers in training, as word dropout replaces rare words by ``[UNK]``,
    trains the placeholder in the contexts numbers occur in, while the other numbers keep
    their own tokens (the vocabulary and what a seen number reads as do not change). The
    tokens are the ones :func:`~headwise.text.number_tokens.whole_number_ids` names (a
    number by the tokenizer's own pattern, never a lone 一 of 一下); a slot's span and value
    come from the text's characters, so its tags are unchanged. The replacement is drawn
    once, when the rows are encoded, from ``random.Random(seed)``: the same rows every
    epoch, and a resumed run trains on the rows it started with.

    Args:
        rows: :func:`encode_rows`' training rows (their ``input_ids`` are changed).
        tokenizer: their tokenizer; without a ``[NUM]`` token nothing is replaced.
        share: each number token's chance of being replaced, in [0, 1).
        seed: the draw's seed.

    Raises:
        ValueError: ``share`` outside [0, 1).
    """
    if not 0.0 <= share < 1.0:
        raise ValueError(f"share must be in [0, 1), got {share}")
    num = tokenizer.number_token_id
    numbers = set(whole_number_ids(tokenizer))
    if not share or num is None or not numbers:
        return 0
    rng = random.Random(f"{seed}:numbers")
    replaced = 0
    for row in rows:
        ids = row["input_ids"]
        for i, token in enumerate(ids):
            if token in numbers and rng.random() < share:
                ids[i] = num
                replaced += 1
    return replaced


def init_prior_bias(model: JointHeads, train: Sequence[Example],
                    intents: list[str]) -> None:
    """Start each intent's sigmoid at its training frequency (Lin et al., 2017, "prior
    initialisation"): bias = log(p / (1 - p)), p clipped to [1e-4, 1 - 1e-4].

    With a zero bias every intent starts at probability 0.5, so a model trained for a few
    epochs answers most intents for every text (the quick demo's micro-F1 of 0.04); from
    the prior it starts by answering none and learns which intents a text has."""
    if not model.multi_label:
        return
    counts = Counter(i for e in train for i in set(e.intents))
    p = np.clip(np.array([counts[i] for i in intents], dtype=np.float64) / max(len(train), 1),
                1e-4, 1 - 1e-4)
    with torch.no_grad():
        model.classifier.bias.copy_(torch.from_numpy(np.log(p / (1 - p))))


def encode_rows(tokenizer: Tokenizer, examples: Sequence[Example], intents: list[str],
                tag_index: dict[str, int], max_length: int, chunk: int = 256
                ) -> list[dict[str, Any]]:
    """Trainer rows: ``input_ids``, multi-hot ``labels`` and (with tags) ``tag_labels``.

    Slots whose name has no tag (unseen in training) are left untagged (``O``).
    """
    index = {name: i for i, name in enumerate(intents)}
    rows: list[dict[str, Any]] = []
    for start in range(0, len(examples), chunk):
        part = examples[start:start + chunk]
        spans = [[s for s in e.slots if f"B-{s.name}" in tag_index] for e in part]
        enc = encode_with_tags(tokenizer, [e.text for e in part], spans, tag_index or {"O": 0},
                               max_length=max_length)
        for i, e in enumerate(part):
            n = int(enc["attention_mask"][i].sum())
            target = [0.0] * len(intents)
            for name in e.intents:
                if name in index:
                    target[index[name]] = 1.0
            row = {"input_ids": enc["input_ids"][i, :n].tolist(), "labels": target}
            if tag_index:
                row["tag_labels"] = enc["tags"][i, :n].tolist()
            rows.append(row)
    return rows


@torch.no_grad()
def joint_validation(model: nn.Module, loader) -> dict[str, float]:
    """Validation metrics of a joint model: intent micro-F1 at the best global threshold
    (the one the classifier will be given; a fixed 0.5 reads 0 for the first epochs of a
    model with many rare intents, which stops training before it starts), slot-token F1
    (over tokens whose gold or predicted tag is not ``O``), their mean as ``score``, and
    the loss."""
    device = next(model.parameters()).device
    probs, gold, loss, n = [], [], 0.0, 0
    tag_tp = tag_pred = tag_gold = 0
    for batch in loader:
        out = model(**{k: v.to(device) for k, v in batch.items()})
        k = len(batch["labels"])
        loss, n = loss + float(out["loss"]) * k, n + k
        probs.append(torch.sigmoid(out["logits"].float()).cpu().numpy())
        gold.append(batch["labels"].numpy() > 0.5)
        if "tag_labels" in batch:
            scored = batch["attention_mask"] & (batch["tag_labels"] != -100)
            p = out["tag_logits"].argmax(-1).cpu()[scored]
            g = batch["tag_labels"][scored]
            tag_tp += int(((p == g) & (g != 0)).sum())
            tag_pred += int((p != 0).sum())
            tag_gold += int((g != 0).sum())
    p, g = np.concatenate(probs), np.concatenate(gold)
    m = multilabel_metrics(decide(p, tune_thresholds(p, g)), g)
    tag_f1 = 2 * tag_tp / (tag_pred + tag_gold) if tag_pred + tag_gold else None
    score = m["micro_f1"] if tag_f1 is None else (m["micro_f1"] + tag_f1) / 2
    return {"score": score, "micro_f1": m["micro_f1"], "exact_match": m["exact_match"],
            "tag_f1": float("nan") if tag_f1 is None else tag_f1, "loss": loss / max(n, 1)}


def compound_network(recipe: IntentRecipe, texts: list[str], intents: list[str],
                     tags: list[str] | None, run_dir: Path | None = None, resume: bool = False
                     ) -> tuple[JointHeads, Tokenizer, dict[str, Any] | None]:
    """Stage 2: the joint model and its tokenizer: a pretrained encoder with fresh intent
    and tag heads, or a from-scratch Transformer or BiLSTM (``bilstm_joint``; its tokenizer
    trained on ``texts`` and, with ``run_dir``, saved there so that a resumed run reads it
    back); and for a pretrained encoder what
    :func:`~headwise.intent.training.builders.load_pretrained_for_task` says of it (None
    otherwise).

    Raises:
        ValueError: a pretrained checkpoint that does not fit the joint model.
    """
    joint_type = "bilstm_joint" if recipe.architecture_name == "bilstm" else "joint_intent_slot"
    joint = dict(model_type=joint_type, multi_label=True, slot_tags=tags)
    part = recipe.architecture
    info = None
    if recipe.architecture_name == "pretrained":
        base, tokenizer, info = load_pretrained_for_task(recipe, texts, intents)
        config = base.config.replace(**joint, labels=intents, **part.model_overrides)
        model = JointIntentSlotModel(config)
        missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
        stray = [k for k in missing if not k.startswith(_FRESH)]
        if unexpected or stray:
            raise ValueError(f"the pretrained encoder does not fit the joint model: missing "
                             f"{stray}, unexpected {unexpected}")
    elif run_dir is not None:  # saved with the checkpoints: a resume reads it back
        tokenizer = run_tokenizer(texts, recipe, run_dir, resume=resume)
        model = build_intent_model(recipe, tokenizer, intents, **joint)
    else:
        from headwise.text import train_tokenizer

        tokenizer = train_tokenizer(texts, kind=part.tokenizer, vocab_size=part.vocab_size)
        model = build_intent_model(recipe, tokenizer, intents, **joint)
    mark_cue_tokens(model, tokenizer)
    return model, tokenizer, info


def _split(examples: list[Example], recipe: IntentRecipe
           ) -> tuple[list[Example], list[Example]]:
    order = list(range(len(examples)))
    random.Random(recipe.train.seed).shuffle(order)
    cut = max(1, round(len(order) * recipe.valid_fraction)) if recipe.valid_fraction else 0
    held = set(order[:cut])
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])


def compound_targets(examples: Sequence[Example], intents: list[str]) -> np.ndarray:
    """The examples' intents as an (examples, intents) bool table (intents not in
    ``intents`` left out)."""
    index = {name: i for i, name in enumerate(intents)}
    gold = np.zeros((len(examples), len(intents)), dtype=bool)
    for r, e in enumerate(examples):
        for name in e.intents:
            if name in index:
                gold[r, index[name]] = True
    return gold


def tune_compound(clf: CompoundClassifier, valid: list[Example], per_intent: bool,
                  metric: str = "micro_f1") -> tuple[Thresholds, dict[str, Any]]:
    """Stage 5: the decision thresholds tuned on the validation probabilities for ``metric``
    (one, one per intent, or for exact match one for the most probable intent and one for
    the others), and the validation metrics with them (0.5 and none without validation)."""
    if not valid:
        return Thresholds(0.5, metric=metric), {}
    probs, _ = clf.analyse([e.text for e in valid])
    gold = compound_targets(valid, clf.intents)
    thresholds = tune_thresholds(probs, gold, per_intent=per_intent, metric=metric)
    m = multilabel_metrics(decide(probs, thresholds), gold, clf.intents)
    return thresholds, {k: m[k] for k in ("micro_f1", "macro_f1", "exact_match")}

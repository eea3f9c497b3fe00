"""Training a compound (multi-label) intent + slot classifier.

``train_compound_classifier(train, valid, recipe, out_dir=...)`` is the job behind
``headwise train --multi-label``: a tokenizer (trained on the training texts, or the
pretrained model's), a :class:`~headwise.models.joint.JointIntentSlotModel` (from scratch,
or a BERT-family encoder with fresh heads), joint training with the project's Trainer
(early stopping on the mean of intent micro-F1 and slot-token F1 on validation), then
thresholds tuned on validation probabilities, and the saved
:class:`~headwise.intent.compound.CompoundClassifier`.

Number-aware heads (``recipe.model_overrides["number_heads"] = [0, 1]``) work for both
model kinds: the chosen heads of every layer get a learned bias towards number tokens.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from headwise.intent.builders import (
    build_intent_model,
    load_pretrained_for_task,
    mark_cue_tokens,
    train_config,
)
from headwise.intent.compound import CompoundClassifier
from headwise.intent.multilabel import Thresholds, decide, multilabel_metrics, tune_thresholds
from headwise.intent.recipe import IntentRecipe
from headwise.models.joint import JointIntentSlotModel
from headwise.text.annotations import AnnotatedExample
from headwise.text.batching import pad_collate
from headwise.text.bio import bio_tag_names, encode_with_tags
from headwise.text.tokenizer import Tokenizer
from headwise.train import Trainer, load_model_weights

#: joint-model parameters a BERT-family checkpoint does not have (fresh at import)
_FRESH = ("tagger.", "classifier.", "encoder.number_bias.", "encoder.is_number_token",
          "encoder.negation_bias.", "encoder.is_negation_token")


@dataclass
class TrainedCompound:
    """What :func:`train_compound_classifier` returns.

    Attributes:
        classifier: the trained classifier (also saved in ``directory``).
        directory: where it was saved.
        thresholds: the tuned decision thresholds.
        valid_metrics: validation intent metrics with those thresholds.
        history: the Trainer's evaluation history.
        train_seconds: wall time of training.
    """

    classifier: CompoundClassifier
    directory: Path
    thresholds: Thresholds
    valid_metrics: dict[str, Any]
    history: list[dict[str, Any]]
    train_seconds: float


def train_compound_classifier(train: Sequence[AnnotatedExample],
                              valid: Sequence[AnnotatedExample] | None = None,
                              recipe: IntentRecipe | None = None, *, out_dir: str | Path,
                              per_intent_thresholds: bool = False, slots: bool = True,
                              resume: bool = False, keep_checkpoints: bool = False
                              ) -> TrainedCompound:
    """Train, tune and save a compound intent + slot classifier.

    Args:
        train: annotated examples (an ``AnnotatedDataset`` or a list); examples without
            intents are kept as negatives for every intent.
        valid: validation examples for early stopping and the thresholds; default: a
            seeded ``recipe.valid_fraction`` of ``train``.
        recipe: model and training settings (``model`` "transformer" or "pretrained:DIR";
            the BiLSTM has no slot tagger here).
        out_dir: the classifier is saved here; checkpoints go to ``out_dir/checkpoints``.
        per_intent_thresholds: tune one threshold per intent (else one for all).
        slots: train the slot tagger when the data has slots.
        resume: continue from the newest checkpoint.
        keep_checkpoints: keep the training checkpoints.

    Raises:
        ValueError: a BiLSTM or TF-IDF recipe, or fewer than two intents in the training
            data.
    """
    recipe = recipe or IntentRecipe()
    if recipe.kind in ("bilstm", "tfidf"):
        what = "the BiLSTM" if recipe.kind == "bilstm" else "a TF-IDF model"
        raise ValueError(f"compound (multi-label) training needs a Transformer or a pretrained "
                         f"encoder, not {what}")
    out_dir = Path(out_dir)
    train = list(train)
    intents = sorted({i for e in train for i in e.intents})
    if len(intents) < 2:
        raise ValueError(f"training data must have at least two intents, found {intents}")
    if valid is None:
        train, valid = _split(train, recipe)
    valid = list(valid)
    slot_names = sorted({s.name for e in train for s in e.slots}) if slots else []
    tags = bio_tag_names(slot_names) if slot_names else None
    torch.manual_seed(recipe.seed)
    model, tokenizer = _build(recipe, [e.text for e in train], intents, tags)
    tag_index = {t: i for i, t in enumerate(tags or [])}
    rows = encode_rows(tokenizer, train, intents, tag_index, recipe.max_length)
    valid_rows = encode_rows(tokenizer, valid, intents, tag_index, recipe.max_length)
    trainer = Trainer(model, train_config(recipe, "score"), rows, valid_data=valid_rows or None,
                      collate_fn=partial(pad_collate, pad_id=tokenizer.pad_token_id),
                      evaluate_fn=joint_validation if valid_rows else None,
                      out_dir=out_dir / "checkpoints")
    start = time.perf_counter()
    result = trainer.train(resume=resume)
    seconds = time.perf_counter() - start
    if result.best_checkpoint is not None:
        load_model_weights(result.best_checkpoint, model)
    clf = CompoundClassifier(model.cpu().eval(), tokenizer, intents, max_length=recipe.max_length)
    thresholds, metrics = _tune(clf, valid, per_intent_thresholds)
    clf.thresholds = thresholds
    clf.info = {"recipe": recipe.to_dict(), "train_examples": len(train),
                "valid_examples": len(valid), "slot_names": slot_names,
                "train_seconds": round(seconds, 1), "steps": result.steps,
                "epochs": result.epochs, "stopped_early": result.stopped_early,
                "valid": metrics}
    clf.save(out_dir)
    if not keep_checkpoints:
        shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    return TrainedCompound(clf, out_dir, thresholds, metrics, result.history, seconds)


def encode_rows(tokenizer: Tokenizer, examples: Sequence[AnnotatedExample], intents: list[str],
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


def _build(recipe: IntentRecipe, texts: list[str], intents: list[str], tags: list[str] | None
           ) -> tuple[JointIntentSlotModel, Tokenizer]:
    joint = dict(model_type="joint_intent_slot", multi_label=True, slot_tags=tags)
    if recipe.kind == "pretrained":
        base, tokenizer, _ = load_pretrained_for_task(recipe, texts, intents)
        config = base.config.replace(**joint, labels=intents, **recipe.model_overrides)
        model = JointIntentSlotModel(config)
        missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
        stray = [k for k in missing if not k.startswith(_FRESH)]
        if unexpected or stray:
            raise ValueError(f"the pretrained encoder does not fit the joint model: missing "
                             f"{stray}, unexpected {unexpected}")
    else:
        from headwise.text import train_tokenizer

        tokenizer = train_tokenizer(texts, kind=recipe.tokenizer, vocab_size=recipe.vocab_size)
        model = build_intent_model(recipe, tokenizer, intents, **joint)
    mark_cue_tokens(model, tokenizer)
    return model, tokenizer


def _split(examples: list[AnnotatedExample], recipe: IntentRecipe
           ) -> tuple[list[AnnotatedExample], list[AnnotatedExample]]:
    order = list(range(len(examples)))
    random.Random(recipe.seed).shuffle(order)
    cut = max(1, round(len(order) * recipe.valid_fraction)) if recipe.valid_fraction else 0
    held = set(order[:cut])
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])


def _tune(clf: CompoundClassifier, valid: list[AnnotatedExample], per_intent: bool
          ) -> tuple[Thresholds, dict[str, Any]]:
    if not valid:
        return Thresholds(0.5), {}
    probs, _ = clf.analyse([e.text for e in valid])
    index = {name: i for i, name in enumerate(clf.intents)}
    gold = np.zeros_like(probs, dtype=bool)
    for r, e in enumerate(valid):
        for name in e.intents:
            if name in index:
                gold[r, index[name]] = True
    thresholds = tune_thresholds(probs, gold, per_intent=per_intent)
    m = multilabel_metrics(decide(probs, thresholds), gold, clf.intents)
    return thresholds, {k: m[k] for k in ("micro_f1", "macro_f1", "exact_match")}

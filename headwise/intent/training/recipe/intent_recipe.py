"""The recipe whole: :class:`IntentRecipe` (five parts and ``valid_fraction``), the
Trainer settings it starts from (:func:`default_train`), what the parts mean together (a
lever the architecture or the task cannot use, refused once, naming the field by its path)
and its file form (:meth:`IntentRecipe.to_dict`, :meth:`IntentRecipe.from_dict`)."""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwise.intent.decision.ood import BLEND_SETTINGS
from headwise.intent.training.defaults import DEFAULT_COMPOUND_JOINS, DEFAULT_EPOCHS, DEFAULT_LR
from headwise.intent.training.recipe.architectures import ARCHITECTURES, Architecture, Transformer
from headwise.intent.training.recipe.decision import Decision
from headwise.intent.training.recipe.fields import check_types, describe_hint, fits_hint
from headwise.intent.training.recipe.levers import Levers
from headwise.intent.training.recipe.tasks import TASKS, MultiLabel, SingleLabel, Task
from headwise.train import TrainConfig

__all__ = ["FAMILY_FIELDS", "PARTS", "IntentRecipe", "default_train"]

#: the parts of a recipe, and what each may hold
PARTS: dict[str, tuple[type, ...]] = {
    "architecture": tuple(ARCHITECTURES.values()), "train": (TrainConfig,),
    "levers": (Levers,), "decision": (Decision,), "task": tuple(TASKS.values())}
#: TrainConfig fields that training sets itself (every epoch's validation decides)
_TRAINING_OWNS = ("eval_every", "early_stopping_metric", "early_stopping_mode",
                  "keep_checkpoints")


#: the ``train`` fields a pretrained encoder's family has measured defaults for
#: (:data:`~headwise.intent.training.defaults.FAMILY_DEFAULTS`)
FAMILY_FIELDS: frozenset[str] = frozenset({"lr", "epochs"})


def default_train(architecture: Architecture) -> TrainConfig:
    """The Trainer settings a recipe of ``architecture`` starts from: the architecture's
    :data:`~headwise.intent.training.defaults.DEFAULT_LR` and
    :data:`~headwise.intent.training.defaults.DEFAULT_EPOCHS` (a pretrained encoder fine-tunes
    in a few epochs, a from-scratch network needs many), 10 % warm-up, patience 5, and
    precision ``auto`` (bf16 autocast where the machine runs it faster, else fp32)."""
    name = architecture.NAME
    return TrainConfig(lr=DEFAULT_LR.get(name, TrainConfig.lr), epochs=DEFAULT_EPOCHS[name],
                       warmup_ratio=0.1, patience=5, precision="auto")


@dataclass
class IntentRecipe:
    """How to build and train an intent classifier (``--config FILE`` is
    :meth:`to_dict` as JSON).

    Attributes:
        architecture: what is built (:data:`ARCHITECTURES`).
        train: the Trainer's settings (None: :func:`default_train` of the architecture; a
            pretrained encoder takes its family's measured ``lr`` / ``epochs``,
            :data:`~headwise.intent.training.defaults.FAMILY_DEFAULTS`, for those of them
            in ``train_defaulted``).
        levers: the loss and the optional levers.
        decision: how answers are decided.
        task: single-label, or multi-label with slots.
        valid_fraction: held out of the training data (stratified) when no validation data
            is given; 0 trains on all of it with no validation: every epoch runs, the last
            weights are kept, the temperature stays 1 and the out-of-scope threshold 0.
        train_defaulted: the fields of :data:`FAMILY_FIELDS` that ``train`` took from
            :func:`default_train` rather than from the caller (all of them when ``train`` is
            None; those a ``--config`` file or option did not give); a pretrained encoder's
            family fills exactly these with its measured values, never a value that was
            given, even one equal to the default.
    """

    architecture: Architecture = field(default_factory=Transformer)
    train: TrainConfig = None  # type: ignore[assignment]  # None: default_train()
    levers: Levers = field(default_factory=Levers)
    decision: Decision = field(default_factory=Decision)
    task: Task = field(default_factory=SingleLabel)
    valid_fraction: float = 0.1
    train_defaulted: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        self.train_defaulted = frozenset(self.train_defaulted)
        unknown = sorted(self.train_defaulted - FAMILY_FIELDS)
        if unknown:
            raise ValueError(f"train_defaulted names {unknown}; only {sorted(FAMILY_FIELDS)} "
                             f"take a family's defaults")
        for part, kinds in PARTS.items():
            value = getattr(self, part)
            if part == "train" and value is None:
                self.train = value = default_train(self.architecture)
                self.train_defaulted = FAMILY_FIELDS
            if not isinstance(value, kinds):
                raise ValueError(f"recipe part {part!r} must be one of "
                                 f"{[k.__name__ for k in kinds]}, got {type(value).__name__}")
        if isinstance(self.valid_fraction, bool) or not isinstance(
                self.valid_fraction, (int, float)) or not 0.0 <= self.valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be in [0, 1), got {self.valid_fraction!r}")
        check_types(self.train, "train")
        owned = [n for n in _TRAINING_OWNS
                 if getattr(self.train, n) != TrainConfig.__dataclass_fields__[n].default]
        if owned:
            raise ValueError(f"train.{owned[0]} is set by training itself (validated every "
                             f"epoch on the task's metric, one checkpoint kept); remove it")
        problem = _what_does_not_apply(self)
        if problem:
            raise ValueError(problem)

    @property
    def architecture_name(self) -> str:
        """``"transformer"``, ``"bilstm"``, ``"pretrained"`` or ``"tfidf"``."""
        return self.architecture.NAME

    @property
    def multi_label(self) -> bool:
        """Whether the task is multi-label (compound) training."""
        return isinstance(self.task, MultiLabel)

    @property
    def linear_probe(self) -> bool:
        """Whether LP-FT runs: ``levers.linear_probe``, or for None a pretrained encoder's
        default, on in both tasks (single-label: its family's,
        :data:`~headwise.intent.training.defaults.FAMILY_DEFAULTS`; multi-label: see
        :mod:`~headwise.intent.training.defaults`)."""
        lp = self.levers.linear_probe
        return lp if lp is not None else self.architecture_name == "pretrained"

    @property
    def compound_joins(self) -> float:
        """The share of joined rows a multi-label run adds: ``task.compound_joins``, or for
        None the architecture's
        (:data:`~headwise.intent.training.defaults.DEFAULT_COMPOUND_JOINS`).

        Raises:
            ValueError: a single-label recipe (it has no joined rows).
        """
        if not isinstance(self.task, MultiLabel):
            raise ValueError("compound_joins is a multi-label recipe's (task.type multi_label)")
        joins = self.task.compound_joins
        return joins if joins is not None else DEFAULT_COMPOUND_JOINS[self.architecture_name]

    def replace(self, **parts: Any) -> IntentRecipe:
        """A copy with some parts replaced, or with ``part__field=value`` changing one field
        of a part (``recipe.replace(train__epochs=2)``)."""
        fields: dict[str, Any] = {}
        for key, value in parts.items():
            part, _, name = key.partition("__")
            if name:
                base = fields.get(part, getattr(self, part))
                fields[part] = dataclasses.replace(base, **{name: value})
            else:
                fields[part] = value
        return dataclasses.replace(self, **fields)

    def to_dict(self) -> dict[str, Any]:
        """The recipe as a JSON-serialisable dict, by part; the tagged parts carry their
        ``type``. What a ``--config`` file holds and ``info["recipe"]`` records."""
        return {"architecture": {"type": self.architecture.NAME,
                                 **dataclasses.asdict(self.architecture)},
                "train": self.train.to_dict(), "levers": dataclasses.asdict(self.levers),
                "decision": dataclasses.asdict(self.decision),
                "task": {"type": self.task.NAME, **dataclasses.asdict(self.task)},
                "valid_fraction": self.valid_fraction}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "the recipe") -> IntentRecipe:
        """Build from :meth:`to_dict`'s shape; any part (or field of a part) left out takes
        its default. ``train`` starts from the architecture's :func:`default_train`.

        Raises:
            ValueError: a field of the flat form of headwise 0.x before the parts (each
                named with its new place), an unknown part, type or field (the part's
                fields named), or a value a part refuses.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a JSON object of recipe parts")
        _refuse_old_form(data, where)
        unknown = sorted(set(data) - {*PARTS, "valid_fraction"})
        if unknown:
            raise ValueError(f"{where}: unknown recipe parts {unknown}; the parts: "
                             f"{[*PARTS, 'valid_fraction']}")
        for part in PARTS:
            if part in data and not isinstance(data[part], dict):
                raise ValueError(f"{where}: part {part!r} must be an object of its fields, "
                                 f"got {type(data[part]).__name__}")
        architecture = _tagged("architecture", dict(data.get("architecture", {})),
                               ARCHITECTURES, Transformer.NAME, where)
        task = _tagged("task", dict(data.get("task", {})), TASKS, SingleLabel.NAME, where)
        given = dict(data.get("train", {}))
        _known_fields("train", TrainConfig, given, where)
        _types_fit("train", TrainConfig, given)
        train = TrainConfig.from_dict({**default_train(architecture).to_dict(), **given})
        parts = {"levers": Levers, "decision": Decision}
        built = {}
        for part, cls_ in parts.items():
            fields = dict(data.get(part, {}))
            _known_fields(part, cls_, fields, where)
            built[part] = cls_(**fields)
        return cls(architecture=architecture, train=train, task=task, **built,
                   train_defaulted=FAMILY_FIELDS - set(given),
                   **({"valid_fraction": data["valid_fraction"]} if "valid_fraction" in data
                      else {}))

    @classmethod
    def read_config(cls, path: str | Path) -> dict[str, Any]:
        """The parts a ``--config`` JSON file sets, not yet built into a recipe (``headwise
        train`` adds its options first).

        Raises:
            ValueError: not valid JSON, not an object, or the flat form of earlier versions
                (each field's new place named).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object of recipe parts")
        _refuse_old_form(data, str(path))
        return data

    @classmethod
    def from_json(cls, path: str | Path) -> IntentRecipe:
        """Read a ``--config`` JSON file (:meth:`read_config`, :meth:`from_dict`)."""
        return cls.from_dict(cls.read_config(path), where=str(path))


def _types_fit(part: str, cls_: type, fields: dict[str, Any]) -> None:
    """Refuse a field given with the wrong type (before the part is built, whose own checks
    would compare a string with a number)."""
    hints = typing.get_type_hints(cls_)
    for name, value in fields.items():
        if not fits_hint(value, hints[name]):
            raise ValueError(f"{part}.{name} must be {describe_hint(hints[name])}, got {value!r}")


def _known_fields(part: str, cls_: type, fields: dict[str, Any], where: str) -> None:
    names = [f.name for f in dataclasses.fields(cls_)]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        what = f"{part} ({getattr(cls_, 'NAME', cls_.__name__)})"
        raise ValueError(f"{where}: {unknown} are not fields of {what}; its fields: {names}")


def _tagged(part: str, fields: dict[str, Any], choices: dict[str, type], default: str,
            where: str) -> Any:
    """A tagged part (``{"type": NAME, ...fields}``) built."""
    name = fields.pop("type", default)
    if name not in choices:
        raise ValueError(f"{where}: {part}.type must be one of {list(choices)}, got {name!r}")
    _known_fields(part, choices[name], fields, where)
    _types_fit(part, choices[name], fields)
    return choices[name](**fields)


# --- what the parts mean together ----------------------------------------------------------
def _changed(part: Any, default: Any) -> list[str]:
    """The fields of ``part`` that differ from ``default``'s."""
    return [f.name for f in dataclasses.fields(part)
            if getattr(part, f.name) != getattr(default, f.name)]


def _what_does_not_apply(r: IntentRecipe) -> str | None:
    """The first setting of ``r`` that its architecture or task cannot use, as a message
    naming its path and why; None when every part fits."""
    arch, lev = r.architecture_name, r.levers
    if arch == "tfidf":
        extra = [n for n in _changed(r.train, default_train(r.architecture))
                 if n not in ("seed", "progress")]
        if extra:
            return (f"train.{extra[0]} does not apply to the tfidf architecture (a TF-IDF fit "
                    f"has no training loop; it reads train.seed and train.progress)")
        extra = [n for n in _changed(lev, Levers()) if n not in ("class_weighting",
                                                                 "label_cleaning")
                 and not (n == "outlier_exposure" and lev.outlier_exposure == 0)]
        if extra:
            return (f"levers.{extra[0]} does not apply to the tfidf architecture (of the "
                    f"levers it reads class_weighting and label_cleaning)")
        if r.decision.ood_detector != Decision.ood_detector:
            return ("decision.ood_detector does not apply to the tfidf architecture (a TF-IDF "
                    "model answers out-of-scope on its top probability)")
    if lev.pretrain_epochs and arch != "transformer":
        return (f"levers.pretrain_epochs: masked-LM self-pretraining is the from-scratch "
                f"Transformer's, not the {arch} architecture's")
    if lev.linear_probe and arch not in ("transformer", "pretrained"):
        return (f"levers.linear_probe: LP-FT fits a head on a Transformer's or a pretrained "
                f"encoder's features, not the {arch} architecture's")
    probing = lev.linear_probe or (lev.linear_probe is None and arch == "pretrained")
    if lev.probe_c != Levers.probe_c and not probing:
        return "levers.probe_c is used only with levers.linear_probe; remove it or set that too"
    if lev.blend != "none" and r.decision.ood_detector not in BLEND_SETTINGS:
        return (f"levers.blend={lev.blend!r} answers out-of-scope on the blend's top "
                f"probability; decision.ood_detector {r.decision.ood_detector!r} scores the "
                f"network alone: keep it 'max_prob' or remove the blend")
    if lev.distill == "teacher" and not r.multi_label:
        return ("levers.distill='teacher' is the multi_label task's (a compound teacher's "
                "per-intent probabilities); a single-label student of `headwise distill` "
                "learns its teacher's softmax through --temperature and --alpha")
    if arch == "pretrained" and not r.multi_label and r.architecture.model_overrides:
        return ("architecture.model_overrides: single-label fine-tuning keeps the "
                "checkpoint's architecture (overrides shape the multi-label joint model)")
    if r.multi_label:
        if arch == "tfidf":
            return ("task multi_label needs a Transformer, a BiLSTM or a pretrained encoder: "
                    "the joint intent + slot model has no tfidf form")
        for name in ("gce_q", "label_cleaning"):
            if getattr(lev, name) != getattr(Levers, name):
                return (f"levers.{name} is single-label training's; the multi_label task "
                        f"trains one sigmoid per intent and a slot tagger")
        if lev.outlier_exposure:
            return ("levers.outlier_exposure is single-label training's: a multi_label row "
                    "out of scope is already a training row, one with no intents (every "
                    "sigmoid's target 0)")
        if lev.distill == "tfidf":
            return ("levers.distill='tfidf' is single-label training's; the multi_label task "
                    "distils a compound teacher (levers.distill='teacher', set by `headwise "
                    "distill`)")
        if lev.blend != "none" and isinstance(lev.blend_c, list):
            return ("levers.blend_c: the multi_label task's blend fits one C (a list of "
                    "candidates is chosen by single-label cross-validation)")
        changed = _changed(r.decision, Decision())
        if changed:
            return (f"decision.{changed[0]} does not apply to the multi_label task: "
                    f"{_MULTI_LABEL_DECISION[changed[0]]}")
    return None


_REJECT_WHY = (
    "a compound model answers out-of-scope when no intent reaches its own threshold, and "
    "those thresholds are each tuned for F1 on validation (task.per_intent_thresholds). A "
    "reject budget would cap the share of in-scope validation rows left with no intent by "
    "lowering thresholds that F1 chose, a second rule (which intents, by how much) that "
    "nothing here has measured; and the decision part's default budget, which every "
    "multi_label recipe carries, would then move every compound model's thresholds. To never "
    "answer out-of-scope, ask for at_least_one when predicting")
#: why each decision field is refused for the multi_label task
_MULTI_LABEL_DECISION: dict[str, str] = {
    "prior_correction": "the logit adjustment shifts a softmax over the intents towards rare "
                        "ones; a compound model's independent sigmoids get per-intent "
                        "thresholds instead (task.per_intent_thresholds)",
    "max_reject": _REJECT_WHY, "reject_budget": _REJECT_WHY, "reject_confidence": _REJECT_WHY,
    "ood_detector": "a compound model is out of scope when no intent reaches its threshold; "
                    "there is no single top probability or pooled vector for a detector to "
                    "replace",
    "oos_labels": "a compound row is out of scope when its intents list is empty (the "
                  "reader also reads a label of text.labels.OOS_LABELS, such as 'oos', as "
                  "none); a data set's own out-of-scope label is a single-label file's",
}


#: where each field of the flat recipe of headwise 0.x before the parts now lives, for the
#: message that refuses an old file
_OLD_PLACES: dict[str, str] = {
    "model": "architecture.type (and architecture.name for pretrained:NAME)",
    **{n: f"architecture.{n}" for n in (
        "tokenizer", "vocab_size", "max_length", "d_model", "num_layers", "num_heads", "d_ff",
        "fusion", "norm", "position", "pooling", "dropout", "attention_dropout",
        "lstm_embed_dim", "lstm_hidden", "lstm_pooling", "input_prefix", "trim_vocab",
        "model_overrides")},
    **{n: f"train.{n}" for n in ("epochs", "batch_size", "lr", "weight_decay", "warmup_ratio",
                                 "schedule", "patience", "seed", "progress")},
    **{n: f"levers.{n}" for n in (
        "label_smoothing", "gce_q", "class_weighting", "pretrain_epochs", "pretrain_lr",
        "pretrain_mask_prob", "linear_probe", "probe_c", "label_cleaning", "distill",
        "distill_weight", "blend")},
    "tfidf_c": "architecture.c (the tfidf architecture) or levers.blend_c (a blend)",
    **{n: f"decision.{n}" for n in ("prior_correction", "max_reject", "reject_budget",
                                    "reject_confidence", "ood_detector")},
    "select_on": "task.select_on",
}


def _refuse_old_form(data: dict[str, Any], where: str) -> None:
    """Refuse a recipe in the flat form (or the old ``training`` part), naming each field's
    new place."""
    old = {k: v for k, v in data.items() if k in _OLD_PLACES}
    if isinstance(data.get("training"), dict):
        old.update(data["training"])
    for part in ("architecture", "levers", "decision"):
        if isinstance(data.get(part), dict) and "model" in data[part]:
            old.update(data[part])
    moved = [k for k in old if k in _OLD_PLACES]
    if moved or "training" in data:
        places = "; ".join(f"{k} is now {_OLD_PLACES[k]}" for k in moved)
        raise ValueError(f"{where} is in the flat recipe form of earlier headwise versions; "
                         f"a recipe is now by part (architecture, train, levers, decision, "
                         f"task): {places or 'training is now train'}")

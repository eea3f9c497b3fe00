"""The recipe of an intent classifier, shaped like what it builds.

An :class:`IntentRecipe` is five parts and one number:

* ``architecture``: one of :class:`Transformer` (from scratch), :class:`BiLSTM` (the
  baseline), :class:`PretrainedEncoder` (an imported checkpoint with a fresh head) or
  :class:`Tfidf` (TF-IDF features and a logistic regression, no network); each part owns
  the fields of its architecture, so a field another architecture reads cannot be written;
* ``train``: the Trainer's own :class:`~headwise.train.TrainConfig`;
* ``levers``: the loss and what may be added around training (:class:`Levers`);
* ``decision``: how answers are decided once trained (:class:`Decision`);
* ``task``: :class:`SingleLabel`, or :class:`MultiLabel` (several intents per text and slots);
* ``valid_fraction``: held out of the training data when no validation data is given.

Each part checks its own fields (type and range) when built, and the recipe checks once
what the parts mean together (a lever the architecture or the task cannot use), every
message naming the field by its path (``levers.pretrain_epochs``). A ``--config`` file is
the recipe's :meth:`IntentRecipe.to_dict`::

    {"architecture": {"type": "transformer", "d_model": 128, "num_layers": 2},
     "train": {"epochs": 10, "lr": 0.001},
     "levers": {"linear_probe": true},
     "decision": {"ood_detector": "energy"},
     "task": {"type": "single_label"}}

Training a recipe is :func:`~headwise.intent.training.pipeline.train_intent_classifier`'s;
what it builds is :mod:`.builders`'.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from headwise.intent.decision.ood import BLEND_SETTINGS, check_ood_setting
from headwise.intent.decision.oos import REJECT_CONFIDENCE, check_reject_confidence
from headwise.intent.training.cleaning import CLEANING_MODES
from headwise.intent.training.defaults import DEFAULT_COMPOUND_JOINS, DEFAULT_EPOCHS, DEFAULT_LR
from headwise.models.config import ModelConfig
from headwise.text.tokenizer import PRE_SPLITS
from headwise.train import TrainConfig

__all__ = ["ARCHITECTURES", "FAMILY_FIELDS", "PARTS", "TASKS", "BiLSTM", "Decision",
           "IntentRecipe", "Levers",
           "MultiLabel", "PretrainedEncoder", "SingleLabel", "Tfidf", "Transformer",
           "architecture_from_spec", "default_train", "describe_hint"]


# --- field types ---------------------------------------------------------------------------
def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits a field's type hint (no bool for a number, no float for an
    int, a list's items checked)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (list, tuple):
        items = typing.get_args(hint) or (Any,)
        return isinstance(value, (list, tuple)) and all(_matches(v, items[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def describe_hint(hint: Any) -> str:
    """A type hint in words, as a message or the docs say it."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(describe_hint(h) for h in typing.get_args(hint))
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             type(None): "null"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) in (list, tuple):
        item = describe_hint(typing.get_args(hint)[0]).removeprefix("an ").removeprefix("a ")
        return f"a list of {item}s"
    if typing.get_origin(hint) is dict:
        return "an object"
    return getattr(hint, "__name__", str(hint))


def _check_types(part: Any, path: str) -> None:
    """Refuse a field of the dataclass ``part`` whose value has the wrong type, naming it
    by ``path.field``."""
    hints = typing.get_type_hints(type(part))
    for f in dataclasses.fields(part):
        value = getattr(part, f.name)
        if not _matches(value, hints[f.name]):
            raise ValueError(f"{path}.{f.name} must be {describe_hint(hints[f.name])}, got "
                             f"{value!r}")


def _check_choice(path: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{path} must be one of {list(choices)}, got {value!r}")


def _check_overrides(path: str, overrides: dict[str, Any], own: tuple[str, ...]) -> None:
    """``model_overrides`` must name ModelConfig fields the part does not own itself."""
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"{path}.model_overrides: {unknown} are not ModelConfig fields")
    mine = sorted(set(overrides) & set(own))
    if mine:
        raise ValueError(f"{path}.model_overrides: {mine} are fields of the part itself "
                         f"({path}.{mine[0]})")


# --- the architectures ---------------------------------------------------------------------
@dataclass
class Transformer:
    """The from-scratch Transformer encoder; its shape fields are
    :class:`~headwise.models.config.ModelConfig`'s, under its names.

    Attributes:
        tokenizer: ``"auto"`` (character level for Chinese, WordPiece otherwise),
            ``"char"`` or ``"wordpiece"``, trained on the training texts.
        vocab_size: WordPiece vocabulary size (a character vocabulary takes what it needs,
            so it is refused beside ``tokenizer="char"``).
        max_length: longest input in tokens, special tokens included (ModelConfig's
            ``max_position``).
        d_model: hidden size.
        num_layers: encoder layers.
        num_heads: attention heads per layer (``d_model`` must divide by it).
        d_ff: feed-forward size (None: ``2 * d_model``).
        fusion: how the heads' outputs are combined (ModelConfig ``fusion``).
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        position: position encoding (ModelConfig ``position``).
        pooling: how token vectors become one (ModelConfig ``pooling``): ``"mean"``,
            ``"cls"`` (the first token) or ``"max"`` (element-wise maximum over real
            tokens; ``headwise inspect``'s head analysis reads cls- and mean-pooled
            models only).
        dropout: dropout of the embeddings and sublayers.
        attention_dropout: dropout of the attention weights.
        model_overrides: any further ModelConfig fields (``number_heads``,
            ``negation_heads``, ...).
    """

    NAME: ClassVar[str] = "transformer"
    tokenizer: str = "auto"
    vocab_size: int = 8000
    max_length: int = 64
    d_model: int = 256
    num_layers: int = 2
    num_heads: int = 8
    d_ff: int | None = None
    fusion: str = "concat"
    norm: str = "layernorm"
    position: str = "learned"
    pooling: str = "mean"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_scratch(self)
        if min(self.d_model, self.num_layers, self.num_heads) < 1 or self.d_model % self.num_heads:
            raise ValueError(f"architecture.d_model ({self.d_model}) must be a positive "
                             f"multiple of architecture.num_heads ({self.num_heads}), and "
                             f"num_layers ({self.num_layers}) positive")

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME


@dataclass
class BiLSTM:
    """The BiLSTM baseline; its fields are :class:`~headwise.models.config.ModelConfig`'s.

    Attributes:
        tokenizer: as the Transformer's.
        vocab_size: as the Transformer's.
        max_length: longest input in tokens.
        lstm_embed_dim: token embedding size.
        lstm_hidden: hidden size of each direction.
        lstm_pooling: how the time steps become one vector (``"max"``, ``"mean"``,
            ``"last"`` or ``"attention"``).
        dropout: dropout of the embeddings and the pooled vector.
        model_overrides: any further ModelConfig fields.
    """

    NAME: ClassVar[str] = "bilstm"
    tokenizer: str = "auto"
    vocab_size: int = 8000
    max_length: int = 64
    lstm_embed_dim: int = 128
    lstm_hidden: int = 128
    lstm_pooling: str = "max"
    dropout: float = 0.1
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_scratch(self)

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME


def _check_scratch(part: Transformer | BiLSTM) -> None:
    """The checks of a from-scratch network's part."""
    _check_types(part, "architecture")
    _check_choice("architecture.tokenizer", part.tokenizer, ("auto", "char", "wordpiece"))
    if part.tokenizer == "char" and part.vocab_size != type(part).vocab_size:
        raise ValueError("architecture.vocab_size is a WordPiece vocabulary's: a character "
                         "vocabulary (tokenizer 'char') takes what it needs; remove one")
    if part.max_length < 2 or not 0.0 <= part.dropout < 1.0:
        raise ValueError(f"architecture.max_length must be >= 2 and architecture.dropout in "
                         f"[0, 1), got {part.max_length}, {part.dropout}")
    own = tuple(f.name for f in dataclasses.fields(part))
    _check_overrides("architecture", part.model_overrides, own + ("max_position",))


@dataclass
class PretrainedEncoder:
    """An imported pretrained encoder with a fresh head; its architecture and tokenizer are
    the checkpoint's.

    Attributes:
        name: a BERT, RoBERTa or XLM-R checkpoint directory in Hugging Face layout, a
            headwise model directory, or a name of
            :func:`~headwise.models.catalog.pretrained_path` (``multilingual-e5-small``,
            ``all-minilm-l6-v2``).
        max_length: longest input in tokens, special tokens included.
        input_prefix: text read before every input (e5 was trained with ``"query: "``);
            None: the checkpoint's own (its ``headwise_source.json``), ``""``: none. Saved
            in the classifier's tokenizer, so predict and serve apply it.
        trim_vocab: vocabulary trimming (:mod:`headwise.models.vocab_trim`): ``"auto"``
            trims a vocabulary of more than
            :data:`~headwise.intent.training.trimming.TRIM_ABOVE` ids to the training
            texts' tokens plus the most frequent pieces; a number is that reserve
            (trimming any vocabulary); ``"none"`` keeps every row.
        pre_split: ``"none"``, or a name of :data:`~headwise.text.tokenizer.PRE_SPLITS`
            that the checkpoint's tokenizer cuts the text at before its vocabulary reads
            it (``"cjk_digits"``: each CJK character and each run of digits a piece of its
            own, so that a slot span's edges fall between tokens); saved in the
            classifier's tokenizer.
        model_overrides: further ModelConfig fields of the multi-label joint model
            (``number_heads``, ...; single-label fine-tuning keeps the checkpoint's).
    """

    NAME: ClassVar[str] = "pretrained"
    name: str = ""
    max_length: int = 64
    input_prefix: str | None = None
    trim_vocab: str | int = "auto"
    pre_split: str = "none"
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_types(self, "architecture")
        if not self.name:
            raise ValueError("architecture.name: a pretrained encoder needs its checkpoint "
                             "(a directory or an installable name: --model pretrained:NAME)")
        tv = self.trim_vocab
        if tv not in ("auto", "none") and not (isinstance(tv, int) and tv >= 0):
            raise ValueError(f"architecture.trim_vocab must be auto, none or a reserve >= 0, "
                             f"got {tv!r}")
        if self.pre_split != "none" and self.pre_split not in PRE_SPLITS:
            raise ValueError(f"architecture.pre_split must be none or one of "
                             f"{sorted(PRE_SPLITS)}, got {self.pre_split!r}")
        _check_overrides("architecture", self.model_overrides, ("max_position",))

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return f"{self.NAME}:{self.name}"


@dataclass
class Tfidf:
    """TF-IDF n-gram features and a logistic regression
    (:class:`~headwise.intent.tfidf.TfidfClassifier`), no network.

    Attributes:
        c: the inverse L2 strength, or a list of candidates chosen by 5-fold out-of-fold
            macro-F1 (:mod:`headwise.intent.training.tfidf_selection`).
    """

    NAME: ClassVar[str] = "tfidf"
    c: float | list[float] = 10.0

    def __post_init__(self) -> None:
        _check_types(self, "architecture")
        _check_c("architecture.c", self.c)

    @property
    def spec(self) -> str:
        """How ``headwise train --model`` names it."""
        return self.NAME


def _check_c(path: str, c: float | list[float]) -> None:
    cs = c if isinstance(c, list) else [c]
    if not cs or min(cs) <= 0:
        raise ValueError(f"{path} must be positive (or a non-empty list of such), got {c!r}")


Architecture = Transformer | BiLSTM | PretrainedEncoder | Tfidf
#: the architectures by the name a recipe file's ``architecture.type`` gives
ARCHITECTURES: dict[str, type] = {c.NAME: c for c in (Transformer, BiLSTM, PretrainedEncoder,
                                                     Tfidf)}


def architecture_from_spec(spec: str) -> Architecture:
    """The default part of ``--model SPEC``: ``transformer``, ``bilstm``, ``tfidf`` or
    ``pretrained:NAME_OR_DIR``.

    Raises:
        ValueError: an unknown architecture (the known ones named).
    """
    name, _, rest = spec.partition(":")
    if name == PretrainedEncoder.NAME:
        return PretrainedEncoder(name=rest)
    if name not in ARCHITECTURES or rest:
        raise ValueError(f"--model must be one of {sorted(set(ARCHITECTURES) - {'pretrained'})} "
                         f"or 'pretrained:NAME_OR_DIR', got {spec!r}")
    return ARCHITECTURES[name]()


# --- the levers, the decision, the task ----------------------------------------------------
@dataclass
class Levers:
    """The loss, and what may be added around training; each is off by default.

    Attributes:
        label_smoothing: cross-entropy label smoothing; multi-label training smooths each
            intent's sigmoid target the same way, ``y * (1 - eps) + eps / 2``.
        gce_q: None (cross-entropy), or the ``q`` in (0, 1] of the noise-robust generalized
            cross-entropy (:func:`~headwise.intent.training.losses.generalized_cross_entropy`;
            single-label).
        class_weighting: ``"none"`` or ``"balanced"`` (each intent's loss weighted by
            ``n / (intents * count)``; multi-label: each intent's positives weigh
            ``n / (2 * positives)`` and its negatives ``n / (2 * negatives)``).
        pretrain_epochs: epochs of masked-LM self-pretraining on the training texts before
            fine-tuning (:mod:`headwise.intent.training.pretrain`; the Transformer only).
        pretrain_lr: its peak learning rate (None: ``train.lr``).
        pretrain_mask_prob: the share of tokens it masks.
        linear_probe: before fine-tuning, fit the head alone on the frozen encoder's pooled
            vectors (LP-FT, :mod:`headwise.intent.training.linear_probe`; the Transformer and
            pretrained encoders; multi-label, one logistic regression per intent). None: on
            for a pretrained encoder (single-label: its family's default, on for every
            family, the better recipe wherever measured; multi-label: see
            :mod:`~headwise.intent.training.defaults`), off for the Transformer.
        probe_c: the probe's inverse L2 strength (scikit-learn's ``C``).
        label_cleaning: ``"none"``, or ``"drop"`` / ``"relabel"`` the training examples that
            confident learning flags as mislabelled (:mod:`headwise.intent.training.cleaning`;
            single-label, the validation data is left as given).
        distill: ``"none"``, ``"tfidf"`` (mix into every training target the intent
            probabilities of a TF-IDF model that did not see the example: 5-fold
            out-of-fold, a network, single-label) or ``"teacher"`` (mix into every
            training target the per-intent sigmoid probabilities of the compound teacher
            that ``headwise distill`` is given: multi-label, the slot tags stay the gold
            ones; :func:`~headwise.intent.training.distillation.distill` sets it).
        distill_weight: the teacher's share of the target, in [0, 1].
        blend: ``"none"``, or ``"tfidf"``: after training a network, fit a TF-IDF model on
            the same rows and blend the two models' probabilities with the TF-IDF share in
            0-0.9 that scores best on the validation data
            (:mod:`headwise.intent.training.blending`; share 0 keeps the network alone).
            Multi-label: a one-vs-rest TF-IDF model, each intent's sigmoid blended, the
            share chosen by validation exact match and the thresholds tuned again; the
            slots stay the network's.
        blend_c: the blended TF-IDF model's inverse L2 strength, or candidates (as
            :class:`Tfidf`'s ``c``; multi-label: one).
        outlier_exposure: the weight ``lambda`` with which a network trains on the training
            data's out-of-scope rows towards a uniform answer over the intents (outlier
            exposure, Hendrycks et al. 2019: ``lambda`` times the cross-entropy between the
            uniform distribution and its softmax,
            :func:`~headwise.intent.training.losses.outlier_exposure_loss`), 0 turning it
            off. Off, those rows choose the out-of-scope threshold and detector beside the
            validation rows; on, they choose nothing (the model has seen them). A network's,
            single-label, with out-of-scope rows in the training data. None (the default):
            the architecture's measured weight
            (:data:`~headwise.intent.training.defaults.DEFAULT_OUTLIER_EXPOSURE`) when the
            training data and the validation data both hold out-of-scope rows (without
            validation data, the split holds out ``valid_fraction`` of the training
            data's for it, and at least the rows ``decision.ood_detector="auto"`` needs, up
            to half) and no teacher's soft targets are given, else 0; the model's
            ``info["train_oos"]`` records the weight used (a warm start decides again on
            its own data). It trades a little in-scope accuracy for out-of-scope recall
            (BENCHMARKS ``demo:ood``).
        token_dropout: word dropout: at each training step every real token becomes the
            unknown token with this probability, except special tokens, negation cues and
            number pieces (:mod:`headwise.intent.training.token_dropout`); 0: off. A
            network's lever (BENCHMARKS ``demo:transformer``).
    """

    label_smoothing: float = 0.1
    gce_q: float | None = None
    class_weighting: str = "none"
    pretrain_epochs: int = 0
    pretrain_lr: float | None = None
    pretrain_mask_prob: float = 0.15
    linear_probe: bool | None = None
    probe_c: float = 1.0
    label_cleaning: str = "none"
    distill: str = "none"
    distill_weight: float = 0.5
    blend: str = "none"
    blend_c: float | list[float] = 10.0
    outlier_exposure: float | None = None
    token_dropout: float = 0.0

    def __post_init__(self) -> None:
        _check_types(self, "levers")
        if not 0.0 <= self.token_dropout < 1.0:
            raise ValueError(f"levers.token_dropout is a probability in [0, 1) (0 is off), "
                             f"got {self.token_dropout}")
        if self.outlier_exposure is not None and not 0.0 <= self.outlier_exposure < float("inf"):
            raise ValueError(f"levers.outlier_exposure is a loss weight: a number >= 0 (0 is "
                             f"off) or None (the architecture's default), got "
                             f"{self.outlier_exposure}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"levers.label_smoothing must be in [0, 1), got "
                             f"{self.label_smoothing}")
        if self.gce_q is not None and not 0.0 < self.gce_q <= 1.0:
            raise ValueError(f"levers.gce_q must be in (0, 1], got {self.gce_q}")
        _check_choice("levers.class_weighting", self.class_weighting, ("none", "balanced"))
        _check_choice("levers.label_cleaning", self.label_cleaning, ("none", *CLEANING_MODES))
        _check_choice("levers.distill", self.distill, ("none", "tfidf", "teacher"))
        _check_choice("levers.blend", self.blend, ("none", "tfidf"))
        if self.pretrain_epochs < 0 or not 0.0 < self.pretrain_mask_prob < 1.0:
            raise ValueError(f"levers.pretrain_epochs must be >= 0 and "
                             f"levers.pretrain_mask_prob in (0, 1), got "
                             f"{self.pretrain_epochs}, {self.pretrain_mask_prob}")
        if not 0.0 <= self.distill_weight <= 1.0 or self.probe_c <= 0:
            raise ValueError(f"levers.distill_weight must be in [0, 1] and levers.probe_c "
                             f"positive, got {self.distill_weight}, {self.probe_c}")
        _check_c("levers.blend_c", self.blend_c)
        default = Levers.__dataclass_fields__
        for name, needs, on in (("distill_weight", "distill", self.distill != "none"),
                                ("pretrain_lr", "pretrain_epochs", self.pretrain_epochs > 0),
                                ("pretrain_mask_prob", "pretrain_epochs",
                                 self.pretrain_epochs > 0),
                                ("blend_c", "blend", self.blend != "none")):
            if not on and getattr(self, name) != default[name].default:
                raise ValueError(f"levers.{name} is used only with levers.{needs}; remove it "
                                 f"or set that too")


@dataclass
class Decision:
    """How answers are decided once the model is trained, on the validation rows
    (single-label; the temperature is always fitted there).

    Attributes:
        prior_correction: logit adjustment towards rare intents, for macro-F1
            (:mod:`headwise.intent.posthoc.prior`): ``"none"``, a fixed ``tau >= 0``, or
            ``"auto"``: ``tau`` chosen by macro-F1 (out-of-fold for a TF-IDF model, on the
            validation data for a network).
        max_reject: out-of-scope threshold without out-of-scope validation examples: the
            largest share of in-scope validation queries it may reject.
        reject_budget: out-of-scope threshold with out-of-scope validation examples: the
            best balance of in-scope accuracy and out-of-scope recall among the thresholds
            that reject at most this share of the in-scope validation queries (None: no
            limit; BENCHMARKS ``demo:heldout``).
        reject_confidence: the confidence the reject budget is kept with (the one-sided
            Clopper-Pearson upper bound of the in-scope reject rate,
            :func:`~headwise.intent.decision.oos.reject_upper_bound`; None: the validation
            rate alone; BENCHMARKS ``demo:heldout``).
        ood_detector: the out-of-scope score (:mod:`headwise.intent.decision.ood`):
            ``"auto"`` (the detector with the best balance of in-scope accuracy and
            out-of-scope recall on the validation rows), ``"max_prob"``, ``"energy"``,
            ``"mahalanobis"``, ``"mahalanobis:ledoit_wolf"``, ``"knn"`` or ``"knn:K"``
            (networks; BENCHMARKS ``demo:ood`` and ``oos:cpu``).
        oos_labels: the data's own out-of-scope label (``"其他"``) or labels (a list),
            besides :data:`~headwise.text.labels.OOS_LABELS` (``oos``, ``out_of_scope``,
            ``none``, ``other`` ...). Rows so labelled are no intent: their texts choose the
            out-of-scope threshold and detector, beside the validation rows (or, with
            ``levers.outlier_exposure``, train the network instead).
    """

    prior_correction: str | float = "none"
    max_reject: float = 0.02
    reject_budget: float | None = 0.05
    reject_confidence: float | None = REJECT_CONFIDENCE
    ood_detector: str = "auto"
    oos_labels: str | list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _check_types(self, "decision")
        if any(not x.strip() for x in self.oos_label_names):
            raise ValueError(f"decision.oos_labels names an empty label: {self.oos_labels!r}")
        pc = self.prior_correction
        if pc not in ("none", "auto") and not (not isinstance(pc, str) and pc >= 0):
            raise ValueError(f"decision.prior_correction must be none, auto or a number >= 0, "
                             f"got {pc!r}")
        if not 0.0 <= self.max_reject < 1.0 or (
                self.reject_budget is not None and not 0.0 <= self.reject_budget < 1.0):
            raise ValueError(f"decision.max_reject and decision.reject_budget must be in "
                             f"[0, 1), got {self.max_reject}, {self.reject_budget}")
        check_reject_confidence(self.reject_confidence)
        check_ood_setting(self.ood_detector)

    @property
    def oos_label_names(self) -> list[str]:
        """:attr:`oos_labels` as a list (one string is one label)."""
        return [self.oos_labels] if isinstance(self.oos_labels, str) else list(self.oos_labels)


@dataclass
class SingleLabel:
    """One intent per text (or out-of-scope).

    Attributes:
        select_on: the validation metric that picks the best epoch and stops early:
            ``"accuracy"`` or ``"macro_f1"``.
    """

    NAME: ClassVar[str] = "single_label"
    select_on: str = "accuracy"

    def __post_init__(self) -> None:
        _check_types(self, "task")
        _check_choice("task.select_on", self.select_on, ("accuracy", "macro_f1"))


#: the most joined rows ``task.compound_joins`` may add, as a share of the training rows
MAX_COMPOUND_JOINS = 4.0


@dataclass
class MultiLabel:
    """Several intents per text (one sigmoid each) and slot spans: the
    :class:`~headwise.intent.compound.classifier.CompoundClassifier`, selected on the mean of
    intent micro-F1 and slot-token F1.

    Attributes:
        slots: train the slot tagger when the data has slots.
        per_intent_thresholds: tune one threshold per intent on validation (else one for
            all).
        threshold_metric: what the thresholds maximise on validation: ``"micro_f1"`` (one
            threshold, or one per intent) or ``"exact_match"`` (the whole intent set right:
            one threshold for the most probable intent and one for the others,
            :func:`~headwise.intent.compound.thresholds.tune_thresholds`); exact match with
            per-intent thresholds is refused.
        number_dropout: the share of the training rows' whole-number tokens replaced by
            ``[NUM]`` (seeded, training rows only), so that the placeholder an unseen
            number is read as at prediction time is trained; a tokenizer without ``[NUM]``
            (WordPiece, a pretrained checkpoint's) has none to replace. 0 turns it off.
            See :func:`~headwise.intent.training.compound.drop_numbers`.
        compound_joins: rows made by joining two training rows (texts joined by
            punctuation, intents united, slots moved), added to training as a share of the
            training rows: 0 adds none, 0.5 half as many again, null the architecture's
            share (``DEFAULT_COMPOUND_JOINS``). See :mod:`~headwise.intent.training.joins`.
            The architecture's share
            (:data:`~headwise.intent.training.defaults.DEFAULT_COMPOUND_JOINS`) was chosen on
            validation exact match of the demo corpus with compound questions for each
            network family (BENCHMARKS.md, ``compound:cpu``) and is recorded as used.
    """

    NAME: ClassVar[str] = "multi_label"
    slots: bool = True
    per_intent_thresholds: bool = False
    threshold_metric: str = "micro_f1"
    number_dropout: float = 0.15
    compound_joins: float | None = None

    def __post_init__(self) -> None:
        _check_types(self, "task")
        _check_choice("task.threshold_metric", self.threshold_metric,
                      ("micro_f1", "exact_match"))
        if self.per_intent_thresholds and self.threshold_metric == "exact_match":
            raise ValueError("task.per_intent_thresholds maximise each intent's F1; "
                             "task.threshold_metric exact_match chooses one threshold for the "
                             "most probable intent and one for the others: use one of the two")
        if not 0.0 <= self.number_dropout < 1.0:
            raise ValueError(f"task.number_dropout must be in [0, 1), got "
                             f"{self.number_dropout}")
        if self.compound_joins is not None and \
                not 0.0 <= self.compound_joins <= MAX_COMPOUND_JOINS:
            raise ValueError(f"task.compound_joins must be in [0, {MAX_COMPOUND_JOINS}], got "
                             f"{self.compound_joins}")


Task = SingleLabel | MultiLabel
#: the tasks by the name a recipe file's ``task.type`` gives
TASKS: dict[str, type] = {c.NAME: c for c in (SingleLabel, MultiLabel)}
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
        _check_types(self.train, "train")
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
        if not _matches(value, hints[name]):
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

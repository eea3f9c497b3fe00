"""The recipe of an intent classifier: every setting of ``headwise train`` in one value.

:class:`IntentRecipe` is what ``--config FILE`` holds (flat, or by part:
:mod:`.recipe_parts`). It checks each field's type and range (:mod:`.recipe_fields`) and
refuses, when built, a field that its model kind's training paths never read
(:mod:`.recipe_paths`). What a recipe builds is :mod:`.builders`'; training one is
:func:`~headwise.intent.training.pipeline.train_intent_classifier`'s
(:mod:`.pipeline`). Four model kinds: a from-scratch Transformer encoder, the BiLSTM
baseline, an imported pretrained encoder with a fresh head (``"pretrained:NAME_OR_DIR"``),
and ``"tfidf"`` (TF-IDF features and a logistic regression, no network).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwise.intent.decision.ood import BLEND_SETTINGS, check_ood_setting
from headwise.intent.decision.oos import REJECT_CONFIDENCE, check_reject_confidence
from headwise.intent.training.cleaning import CLEANING_MODES
from headwise.intent.training.recipe_fields import check_field_types
from headwise.intent.training.recipe_parts import flatten_recipe, recipe_parts
from headwise.intent.training.recipe_paths import check_recipe_paths, kind_paths

__all__ = ["MODEL_KINDS", "IntentRecipe"]

MODEL_KINDS = ("transformer", "bilstm", "tfidf")  # and "pretrained:DIR"


@dataclass
class IntentRecipe:
    """How to build and train an intent classifier (``--config FILE`` is this as JSON).

    Each training path uses some of these fields (the table
    :data:`~headwise.intent.training.recipe_paths.USES`); a field that the recipe's path does not
    use is refused when it differs from its default, at construction when no path of the
    model kind uses it, else when training starts (``headwise train`` also refuses one
    that it was given on purpose, in ``--config`` or as an option, even at its default).

    Args:
        model: ``"transformer"``, ``"bilstm"``, ``"tfidf"`` (TF-IDF features + logistic
            regression, :class:`~headwise.intent.tfidf.TfidfClassifier`; of the training
            fields it uses ``tfidf_c``, ``class_weighting``, ``label_cleaning``,
            ``prior_correction``, ``seed`` and the validation ones) or
            ``"pretrained:NAME_OR_DIR"``: a BERT, RoBERTa or XLM-R
            checkpoint in Hugging Face layout, a headwise model directory, or a name of
            :func:`~headwise.models.catalog.pretrained_path` (``multilingual-e5-small``,
            ``all-minilm-l6-v2``).
        tokenizer: ``"auto"`` (character level for Chinese, WordPiece otherwise),
            ``"char"`` or ``"wordpiece"``; refused for pretrained models (theirs is the
            checkpoint's).
        vocab_size: WordPiece vocabulary size (character vocabularies take what they need,
            so it is refused beside ``tokenizer="char"``).
        max_length: longest input in tokens, special tokens included.
        d_model, num_layers, num_heads, d_ff, fusion, norm, position, pooling, dropout,
            attention_dropout: the Transformer's shape (``d_ff`` None: ``2 * d_model``).
        lstm_embed_dim, lstm_hidden, lstm_pooling: the BiLSTM's shape.
        epochs, batch_size, lr, weight_decay, warmup_ratio, schedule, patience, seed:
            training (see TrainConfig; ``epochs`` / ``lr`` None: a pretrained encoder's
            family's :data:`~headwise.intent.training.defaults.FAMILY_DEFAULTS`, chosen by
            measurement, else the kind's
            :data:`~headwise.intent.training.defaults.DEFAULT_EPOCHS` /
            :data:`~headwise.intent.training.defaults.DEFAULT_LR`: a pretrained encoder
            fine-tunes in a few epochs, a from-scratch network needs many).
        input_prefix: text read before every input of a pretrained encoder (e5 was trained
            with ``"query: "``); None: the checkpoint's own (its ``headwise_source.json``),
            ``""``: none. Saved in the classifier's tokenizer, so predict and serve apply it.
        trim_vocab: vocabulary trimming of a pretrained encoder
            (:mod:`headwise.models.vocab_trim`): ``"auto"`` trims a vocabulary of more than
            :data:`~headwise.intent.training.trimming.TRIM_ABOVE` ids (multilingual ones) to the
            training texts' tokens plus the :data:`~headwise.intent.training.trimming.
            DEFAULT_RESERVE` most frequent pieces; a number is that reserve (trimming any
            vocabulary); ``"none"`` keeps every row.
        label_smoothing: cross-entropy label smoothing; compound training smooths each
            intent's sigmoid target the same way, ``y * (1 - eps) + eps / 2``.
        gce_q: None (cross-entropy), or the ``q`` in (0, 1] of the noise-robust generalized
            cross-entropy (:func:`~headwise.intent.training.losses.generalized_cross_entropy`).
        distill: ``"none"``, or ``"tfidf"``: mix into every training target the intent
            probabilities of a TF-IDF model that did not see the example (5-fold
            out-of-fold, :func:`~headwise.intent.training.cleaning.out_of_fold_probs`): on noisy
            labels, a mislabelled example is pulled towards what the rest of the data says.
        distill_weight: the teacher's share of the target, in [0, 1].
        blend: ``"none"``, or ``"tfidf"``: after training a network, fit a TF-IDF model
            (``tfidf_c``, ``prior_correction``, ``class_weighting``) on the same rows and
            blend the two models' probabilities with the TF-IDF share in 0-0.9 that scores
            best by ``select_on`` on the validation data (:mod:`headwise.intent.training.blending`);
            share 0 keeps the network alone, any other saves a weighted ensemble of the two.
        select_on: the validation metric that picks the best epoch and stops early:
            ``"accuracy"`` or ``"macro_f1"``.
        pretrain_epochs: epochs of masked-LM self-pretraining on the training texts before
            fine-tuning (:mod:`headwise.intent.training.pretrain`; Transformer only; 0: none).
        pretrain_lr: its peak learning rate (None: ``lr``'s value).
        pretrain_mask_prob: the share of tokens it masks.
        linear_probe: before fine-tuning, fit the head alone on the frozen encoder's
            pooled vectors (LP-FT, :mod:`headwise.intent.training.linear_probe`; not the
            BiLSTM). None: the family's default for a pretrained encoder (on for every
            family: it was the better recipe wherever measured), off for the Transformer.
        probe_c: the probe's inverse L2 strength (scikit-learn's ``C``).
        tfidf_c: the TF-IDF model's inverse L2 strength, or a list of candidates chosen by
            5-fold out-of-fold macro-F1 (:mod:`headwise.intent.training.tfidf_selection`); also the
            blended TF-IDF model's (``blend``).
        prior_correction: logit adjustment towards rare intents, for macro-F1
            (:mod:`headwise.intent.posthoc.prior`): ``"none"``, a fixed ``tau >= 0``, or
            ``"auto"``: ``tau`` chosen by macro-F1, out-of-fold for a TF-IDF model, on the
            validation data for a network.
        label_cleaning: ``"none"``, or ``"drop"`` / ``"relabel"`` the training examples
            that confident learning flags as mislabelled (:mod:`headwise.intent.training.cleaning`;
            the validation data is left as given).
        class_weighting: ``"none"`` or ``"balanced"`` (each intent's loss weighted by
            ``n / (intents * count)``, for imbalanced data scored by macro-F1; in compound
            training each intent's positives weigh ``n / (2 * positives)`` and its
            negatives ``n / (2 * negatives)``).
        valid_fraction: held out of the training data (stratified) when no validation
            set is given; 0 trains on all of it with no validation: every epoch runs, the
            last weights are kept, the temperature stays 1 (uncalibrated confidence) and the
            out-of-scope threshold 0 (the classifier never answers out-of-scope).
        max_reject: out-of-scope threshold without out-of-scope validation examples: the
            largest share of in-scope validation queries it may reject.
        reject_budget: out-of-scope threshold with out-of-scope validation examples: the
            best balance of in-scope accuracy and out-of-scope recall among the thresholds
            that reject at most this share of the in-scope validation queries (None: no
            limit). Default 5 %: the balanced optimum alone rejected far more of the demo's
            in-scope questions of held-out phrasing (BENCHMARKS ``demo:heldout``).
        reject_confidence: the confidence the reject budget is kept with: a threshold is
            allowed when the one-sided Clopper-Pearson upper bound of its in-scope reject
            rate is within the budget, so the budget holds for new questions, not only for
            the validation rows (:func:`~headwise.intent.decision.oos.reject_upper_bound`;
            None: the validation rate alone). Default 0.95; the validation rate it allows on
            the demo's validation rows: BENCHMARKS ``demo:heldout``.
        ood_detector: the out-of-scope score (:mod:`headwise.intent.decision.ood`):
            ``"auto"`` (the default: the detector with the best balance of in-scope accuracy
            and out-of-scope recall on the validation rows, of ``"max_prob"``,
            ``"energy"``, ``"knn:1"``, ``"knn"`` and ``"mahalanobis:ledoit_wolf"``; the top
            probability with fewer than 20 out-of-scope validation rows), or one detector:
            ``"max_prob"`` (the calibrated top probability), ``"energy"``,
            ``"mahalanobis"``, ``"mahalanobis:ledoit_wolf"`` (a shrunk covariance),
            ``"knn"`` or ``"knn:K"``. Fitted on the training rows after training, the
            threshold chosen on the validation data, saved with the classifier (networks
            only; a TF-IDF model keeps ``"max_prob"``, and so does a TF-IDF blend unless
            validation keeps the network alone). Measured
            (:mod:`headwise.intent.decision.ood.selection`, BENCHMARKS.md ``demo:ood`` and
            ``oos:cpu``): on the demo's held-out phrasing ``"auto"`` beat the top
            probability for every model, most for the BiLSTM and the fine-tuned encoder; on
            BANKING77-OOS the two tied.
        model_overrides: any further ModelConfig fields.
        progress: progress bars.
    """

    model: str = "transformer"
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
    lstm_embed_dim: int = 128
    lstm_hidden: int = 128
    lstm_pooling: str = "max"
    epochs: int | None = None
    batch_size: int = 32
    lr: float | None = None
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    schedule: str = "linear"
    patience: int | None = 5
    seed: int = 0
    label_smoothing: float = 0.1
    gce_q: float | None = None
    distill: str = "none"
    distill_weight: float = 0.5
    blend: str = "none"
    select_on: str = "accuracy"
    input_prefix: str | None = None
    trim_vocab: str | int = "auto"
    pretrain_epochs: int = 0
    pretrain_lr: float | None = None
    pretrain_mask_prob: float = 0.15
    linear_probe: bool | None = None
    probe_c: float = 1.0
    tfidf_c: float | list[float] = 10.0
    prior_correction: str | float = "none"
    label_cleaning: str = "none"
    class_weighting: str = "none"
    valid_fraction: float = 0.1
    max_reject: float = 0.02
    reject_budget: float | None = 0.05
    reject_confidence: float | None = REJECT_CONFIDENCE
    ood_detector: str = "auto"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    progress: bool = True

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.kind not in (*MODEL_KINDS, "pretrained"):
            raise ValueError(f"model must be one of {MODEL_KINDS} or "
                             f"'pretrained:NAME_OR_DIR', got {self.model!r}")
        if self.kind == "pretrained" and not self.model.partition(":")[2]:
            raise ValueError("pretrained models are given as 'pretrained:NAME_OR_DIR'")
        if self.epochs is not None and (isinstance(self.epochs, bool) or self.epochs < 1):
            raise ValueError(f"epochs must be a positive integer or None, got {self.epochs!r}")
        if self.input_prefix is not None and not isinstance(self.input_prefix, str):
            raise ValueError(f"input_prefix must be a string or None, got "
                             f"{self.input_prefix!r}")
        tv = self.trim_vocab
        if tv not in ("auto", "none") and not (isinstance(tv, int) and not isinstance(tv, bool)
                                               and tv >= 0):
            raise ValueError(f"trim_vocab must be auto, none or a reserve >= 0, got {tv!r}")
        if self.tokenizer not in ("auto", "char", "wordpiece"):
            raise ValueError(f"tokenizer must be auto, char or wordpiece, got {self.tokenizer!r}")
        if self.class_weighting not in ("none", "balanced"):
            raise ValueError(f"class_weighting must be none or balanced, got "
                             f"{self.class_weighting!r}")
        if self.gce_q is not None and not 0.0 < self.gce_q <= 1.0:
            raise ValueError(f"gce_q must be in (0, 1], got {self.gce_q}")
        if self.distill not in ("none", "tfidf") or not 0.0 <= self.distill_weight <= 1.0:
            raise ValueError(f"distill must be none or tfidf and distill_weight in [0, 1], "
                             f"got {self.distill!r}, {self.distill_weight}")
        if self.blend not in ("none", "tfidf"):
            raise ValueError(f"blend must be none or tfidf, got {self.blend!r}")
        if self.blend != "none" and self.ood_detector not in BLEND_SETTINGS:
            raise ValueError(f"blend={self.blend!r} answers out-of-scope on the blend's top "
                             f"probability; ood_detector {self.ood_detector!r} scores the "
                             f"network alone: keep ood_detector 'max_prob' or remove blend")
        if self.select_on not in ("accuracy", "macro_f1"):
            raise ValueError(f"select_on must be accuracy or macro_f1, got {self.select_on!r}")
        if self.pretrain_epochs < 0:
            raise ValueError(f"pretrain_epochs must be >= 0, got {self.pretrain_epochs}")
        if self.label_cleaning not in ("none", *CLEANING_MODES):
            raise ValueError(f"label_cleaning must be none, drop or relabel, got "
                             f"{self.label_cleaning!r}")
        cs = self.tfidf_c if isinstance(self.tfidf_c, list) else [self.tfidf_c]
        if not (self.probe_c > 0 and cs and min(cs) > 0):
            raise ValueError(f"probe_c and tfidf_c must be positive, got {self.probe_c}, "
                             f"{self.tfidf_c}")
        pc = self.prior_correction
        if pc not in ("none", "auto") and not (isinstance(pc, (int, float))
                                               and not isinstance(pc, bool) and pc >= 0):
            raise ValueError(f"prior_correction must be none, auto or a number >= 0, got {pc!r}")
        if not 0.0 < self.pretrain_mask_prob < 1.0:
            raise ValueError(f"pretrain_mask_prob must be in (0, 1), got "
                             f"{self.pretrain_mask_prob}")
        if not 0.0 <= self.valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be in [0, 1), got {self.valid_fraction}")
        if not 0.0 <= self.max_reject < 1.0 or (
                self.reject_budget is not None and not 0.0 <= self.reject_budget < 1.0):
            raise ValueError(f"max_reject and reject_budget must be in [0, 1), got "
                             f"{self.max_reject}, {self.reject_budget}")
        check_reject_confidence(self.reject_confidence)
        check_ood_setting(self.ood_detector)
        check_recipe_paths(self, kind_paths(self.kind))

    @property
    def kind(self) -> str:
        """``"transformer"``, ``"bilstm"``, ``"tfidf"`` or ``"pretrained"``."""
        return self.model.split(":", 1)[0]

    def to_dict(self, *, by_part: bool = False) -> dict[str, Any]:
        """A JSON-serialisable dict: flat, or with ``by_part`` grouped by the recipe's
        parts (:data:`~headwise.intent.training.recipe_parts.PARTS`)."""
        flat = dataclasses.asdict(self)
        return recipe_parts(flat) if by_part else flat

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IntentRecipe:
        """Build from a dict, flat or by part (:func:`~headwise.intent.training.
        recipe_parts.flatten_recipe`); unknown keys are an error naming them."""
        data = flatten_recipe(data)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown recipe keys {unknown}; known: {sorted(names)}")
        return cls(**data)

    @classmethod
    def read_config(cls, path: str | Path) -> dict[str, Any]:
        """The recipe fields a JSON file sets (``headwise train --config FILE``), not yet
        built into a recipe: the command adds its options first, and treats every key
        given here as set on purpose.

        The file may be flat or by part (``{"architecture": {...}, "training": {...}}``,
        :mod:`~headwise.intent.training.recipe_parts`); the fields come back flat.

        Raises:
            ValueError: not valid JSON, not an object, unknown keys (named), or a field
                under the wrong part.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object of recipe fields")
        data = flatten_recipe(data, where=str(path))
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown recipe keys {unknown} in {path}; known: {sorted(names)}")
        return data

    @classmethod
    def from_json(cls, path: str | Path) -> IntentRecipe:
        """Read a JSON file (``headwise train --config FILE``)."""
        return cls.from_dict(cls.read_config(path))


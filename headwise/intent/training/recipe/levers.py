"""The ``levers`` part of a recipe: the loss, and what may be added around training."""

from __future__ import annotations

from dataclasses import dataclass

from headwise.intent.training.cleaning import CLEANING_MODES
from headwise.intent.training.recipe.fields import check_c, check_choice, check_types

__all__ = ["Levers"]


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
        check_types(self, "levers")
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
        check_choice("levers.class_weighting", self.class_weighting, ("none", "balanced"))
        check_choice("levers.label_cleaning", self.label_cleaning, ("none", *CLEANING_MODES))
        check_choice("levers.distill", self.distill, ("none", "tfidf", "teacher"))
        check_choice("levers.blend", self.blend, ("none", "tfidf"))
        if self.pretrain_epochs < 0 or not 0.0 < self.pretrain_mask_prob < 1.0:
            raise ValueError(f"levers.pretrain_epochs must be >= 0 and "
                             f"levers.pretrain_mask_prob in (0, 1), got "
                             f"{self.pretrain_epochs}, {self.pretrain_mask_prob}")
        if not 0.0 <= self.distill_weight <= 1.0 or self.probe_c <= 0:
            raise ValueError(f"levers.distill_weight must be in [0, 1] and levers.probe_c "
                             f"positive, got {self.distill_weight}, {self.probe_c}")
        check_c("levers.blend_c", self.blend_c)
        default = Levers.__dataclass_fields__
        for name, needs, on in (("distill_weight", "distill", self.distill != "none"),
                                ("pretrain_lr", "pretrain_epochs", self.pretrain_epochs > 0),
                                ("pretrain_mask_prob", "pretrain_epochs",
                                 self.pretrain_epochs > 0),
                                ("blend_c", "blend", self.blend != "none")):
            if not on and getattr(self, name) != default[name].default:
                raise ValueError(f"levers.{name} is used only with levers.{needs}; remove it "
                                 f"or set that too")

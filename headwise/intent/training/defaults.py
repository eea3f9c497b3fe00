"""Training defaults chosen by measurement: the learning rate and epochs of each architecture,
and for a pretrained encoder those of its checkpoint family (``config.json``'s
``model_type``), with LP-FT on.

A recipe's ``train`` starts from its architecture's :data:`DEFAULT_LR` and
:data:`DEFAULT_EPOCHS`; a pretrained encoder's ``train.lr`` and ``train.epochs`` left at those
values, and ``levers.linear_probe`` left at None, take its family's:
:func:`~headwise.intent.training.builders.with_family_defaults` fills them in once the
checkpoint is known, and the saved
recipe records the values that were used. Each family's entry says what it was measured on
(BENCHMARKS.md, ``intent:cpu``); a family with no measurement of its own takes the nearest
measured one and says so. The family defaults are single-label training's (where they
were measured); multi-label training of a pretrained encoder takes the architecture's
:data:`DEFAULT_LR` / :data:`DEFAULT_EPOCHS`, with LP-FT on as well (``levers.linear_probe``
None: the intent head is first fitted on the frozen encoder, one logistic regression per
intent, :func:`~headwise.intent.training.linear_probe.fit_multilabel_probe`). That default was
chosen on validation rows of NLU++ banking's low-data setting (all-MiniLM-L6-v2 on fold 0,
three seeded validation splits of it): a freshly initialised intent head barely leaves its
prior start in the few steps of a small data set, so the fine-tuned model scored far below
the TF-IDF floor, while the probe alone scored above it (BENCHMARKS.md, ``compound:cpu``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_COMPOUND_JOINS", "DEFAULT_EPOCHS", "DEFAULT_LR", "DEFAULT_OUTLIER_EXPOSURE",
           "DEFAULT_TRANSFORMER_OVERRIDES", "DEFAULT_TRANSFORMER_POSITION", "FAMILY_DEFAULTS",
           "MULTI_LABEL_PRETRAINED",
           "FamilyDefaults",
           "checkpoint_family", "family_defaults"]

#: default peak learning rate per architecture (AdamW), when the recipe gives none; a
#: pretrained encoder of a family in :data:`FAMILY_DEFAULTS` takes its family's
DEFAULT_LR = {"transformer": 1e-3, "bilstm": 2e-3, "pretrained": 5e-5}
#: default epochs per architecture, when the recipe gives none: a pretrained encoder
#: fine-tunes in a few (practitioners' 2-5), a network trained from scratch needs many
DEFAULT_EPOCHS = {"transformer": 20, "bilstm": 20, "pretrained": 4, "tfidf": 1}
#: default share of joined rows a multi-label run adds per architecture
#: (``task.compound_joins`` None; :mod:`~headwise.intent.training.joins`): each network
#: family's member chosen on validation exact match of the demo corpus with compound
#: questions among none, 0.5 and 1.0 (BENCHMARKS.md, ``compound:cpu``)
DEFAULT_COMPOUND_JOINS = {"transformer": 1.0, "bilstm": 0.5, "pretrained": 1.0}
#: default outlier-exposure weight per architecture (``levers.outlier_exposure`` None), taken
#: when the training data and the validation data both hold out-of-scope rows (the setting it
#: was measured in; elsewhere the training rows choose the threshold and detector): each
#: family's member chosen on the validation mean of in-scope accuracy and out-of-scope recall
#: of the demo corpus with off-topic training rows, between 0 and 0.5 (BENCHMARKS.md,
#: ``demo:ood``, "Out-of-scope training rows"): 0.5 for the networks trained from scratch,
#: 0 for the pretrained encoder (first a tie on validation, which kept the rule that was
#: there before; chosen outright on the corpus with verb negation); a TF-IDF model has no
#: such loss.
DEFAULT_OUTLIER_EXPOSURE = {"transformer": 0.5, "bilstm": 0.5, "pretrained": 0.0, "tfidf": 0.0}


#: the from-scratch Transformer's position encoding and attention levers when the recipe
#: does not say (``architecture.position`` and ``architecture.model_overrides``): rotary
#: positions, heads 0 and 1 of each layer number-aware, heads 2 and 3 negation-aware, each
#: query biased only towards the negation cues of its own clause, the bias starting at 4.
#: The demo's Transformer took them on its corpus's validation rows (``demo:transformer``);
#: the library's default took them against the plain Transformer (learned positions, no
#: biased heads) on validation accuracy of BANKING77, DataCLUE CIC and the demo corpus, by a
#: rule fixed before the runs (BENCHMARKS.md, ``transformer_default:cpu``). A recipe that
#: gives ``architecture.model_overrides`` replaces these levers (``{}``: none of them).
DEFAULT_TRANSFORMER_POSITION = "rope"
DEFAULT_TRANSFORMER_OVERRIDES: dict[str, object] = {
    "number_heads": [0, 1], "negation_heads": [2, 3], "negation_scope": "clause",
    "negation_bias_init": 4.0}


@dataclass(frozen=True)
class FamilyDefaults:
    """How an encoder family is fine-tuned when the recipe does not say.

    Attributes:
        lr: peak learning rate (AdamW, linear decay after 10 % warm-up).
        epochs: fine-tuning epochs (the best one on validation is kept).
        linear_probe: fit the head on the frozen encoder first (LP-FT, Kumar et al. 2022).
        measured: what the choice rests on, for the user and the docs.
    """

    lr: float
    epochs: int
    linear_probe: bool
    measured: str


_XLMR = FamilyDefaults(
    lr=5e-5, epochs=3, linear_probe=True,
    measured="measured on multilingual-e5-small, BANKING77 and DataCLUE CIC; the only "
             "configuration run for this family, so not yet compared with alternatives on "
             "validation rows: BENCHMARKS intent:cpu")
#: fine-tuning defaults per checkpoint family (``config.json`` ``model_type``)
FAMILY_DEFAULTS: dict[str, FamilyDefaults] = {
    "bert": FamilyDefaults(
        lr=2e-5, epochs=6, linear_probe=True,
        measured="chosen on validation accuracy (BANKING77's validation split, never its "
                 "test set) on all-MiniLM-L6-v2 against 4 and 8 epochs at 8e-5 without LP-FT "
                 "and LP-FT at 5e-5 for 8 epochs: BENCHMARKS intent:cpu"),
    "xlm-roberta": _XLMR,
    "roberta": dataclasses.replace(
        _XLMR, measured="no RoBERTa measurement of its own: the XLM-R family's defaults "
                        "(the same layout), " + _XLMR.measured),
}
#: multi-label (compound) fine-tuning of a pretrained encoder, whatever its family: the
#: joint model's fresh intent and tag heads learn little at the single-label default's 5e-5
#: in a few epochs even after LP-FT
MULTI_LABEL_PRETRAINED = FamilyDefaults(
    lr=1e-4, epochs=4, linear_probe=True,
    measured="chosen on validation exact match (the demo corpus with compound questions, "
             "never its test split) on multilingual-e5-small with LP-FT, 4 epochs at 1e-4 "
             "against 5e-5; 8 epochs are within noise of 4 on validation at twice the "
             "training time: BENCHMARKS compound:cpu")
_OTHER = FamilyDefaults(lr=DEFAULT_LR["pretrained"], epochs=DEFAULT_EPOCHS["pretrained"],
                        linear_probe=True,
                        measured="a family with no measurement: the generic pretrained "
                                 "defaults")


def checkpoint_family(directory: str | Path) -> str | None:
    """The ``model_type`` of a Hugging Face checkpoint directory's ``config.json``
    (``"bert"``, ``"xlm-roberta"``, ...), or None when it has none."""
    path = Path(directory) / "config.json"
    if not path.is_file():
        return None
    value = json.loads(path.read_text(encoding="utf-8")).get("model_type")
    return str(value) if value else None


def family_defaults(family: str | None) -> FamilyDefaults:
    """The fine-tuning defaults of an encoder family (:data:`FAMILY_DEFAULTS`), or the
    generic pretrained ones for a family not in the table."""
    return FAMILY_DEFAULTS.get(family or "", _OTHER)

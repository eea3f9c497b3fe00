"""The parts of an :class:`~headwise.intent.training.recipe.IntentRecipe`: the network it
builds, how it trains, the optional levers, and how answers are decided.

A recipe is one flat set of fields (what ``IntentRecipe(...)`` takes), and a recipe file may
be written flat or by part, whichever reads better::

    {"architecture": {"model": "transformer", "d_model": 128, "num_layers": 2},
     "training": {"epochs": 10, "lr": 0.001},
     "levers": {"linear_probe": true},
     "decision": {"ood_detector": "energy"}}

:data:`PARTS` lists every field in exactly one part (a test checks it);
:func:`flatten_recipe` turns a file by part into the flat fields, refusing a field filed
under the wrong part (naming the right one) or given twice; :func:`recipe_parts` is the
other way. Which training path reads which field is
:data:`~headwise.intent.training.recipe_paths.USES`'s to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PARTS", "flatten_recipe", "part_of", "recipe_parts"]

#: part -> its fields, in the recipe's order
PARTS: dict[str, tuple[str, ...]] = {
    # what is built: the model kind, its tokenizer and its shape (each kind reads its own:
    # the Transformer's shape, the BiLSTM's lstm_*, a pretrained encoder's prefix and
    # vocabulary trimming)
    "architecture": (
        "model", "tokenizer", "vocab_size", "max_length", "d_model", "num_layers",
        "num_heads", "d_ff", "fusion", "norm", "position", "pooling", "dropout",
        "attention_dropout", "lstm_embed_dim", "lstm_hidden", "lstm_pooling", "input_prefix",
        "trim_vocab", "model_overrides"),
    # the Trainer's settings, the loss and the validation data
    "training": (
        "epochs", "batch_size", "lr", "weight_decay", "warmup_ratio", "schedule", "patience",
        "seed", "label_smoothing", "gce_q", "select_on", "class_weighting", "valid_fraction",
        "progress"),
    # what may be added around training: distillation from TF-IDF, the TF-IDF blend,
    # masked-LM self-pretraining, LP-FT, the TF-IDF model's C, label cleaning
    "levers": (
        "distill", "distill_weight", "blend", "pretrain_epochs", "pretrain_lr",
        "pretrain_mask_prob", "linear_probe", "probe_c", "tfidf_c", "label_cleaning"),
    # how an answer is decided once the model is trained
    "decision": ("prior_correction", "max_reject", "reject_budget",
                 "reject_confidence", "ood_detector"),
}
_PART_OF = {name: part for part, names in PARTS.items() for name in names}


def part_of(field: str) -> str:
    """The part a recipe field belongs to.

    Raises:
        KeyError: not a recipe field.
    """
    if field not in _PART_OF:
        raise KeyError(f"{field!r} is not a recipe field")
    return _PART_OF[field]


def flatten_recipe(data: Mapping[str, Any], where: str = "the recipe") -> dict[str, Any]:
    """The flat recipe fields of ``data``, written flat, by part, or both.

    A key that names a part (:data:`PARTS`) holds an object of that part's fields; any other
    key is a field. Unknown fields are left for the recipe to refuse (it names the known).

    Raises:
        ValueError: a part that is not an object, a field under the wrong part (the message
            names its part), or a field given twice.
    """
    flat: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for key, value in data.items():
        if key in PARTS:
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: part {key!r} must be an object of its fields "
                                 f"({', '.join(PARTS[key])}), got {type(value).__name__}")
            for field, v in value.items():
                right = _PART_OF.get(field)
                if right is not None and right != key:
                    raise ValueError(f"{where}: {field!r} is under {key!r}; it belongs to "
                                     f"{right!r}")
                if field in flat:
                    raise ValueError(f"{where}: {field!r} is given twice ({seen[field]} and "
                                     f"{key!r})")
                flat[field], seen[field] = v, repr(key)
        else:
            if key in flat:
                raise ValueError(f"{where}: {key!r} is given twice ({seen[key]} and at the "
                                 f"top level)")
            flat[key], seen[key] = value, "the top level"
    return flat


def recipe_parts(fields: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Flat recipe fields by part (only the parts and fields given), in :data:`PARTS`'s
    order.

    Raises:
        KeyError: a key that is not a recipe field.
    """
    out: dict[str, dict[str, Any]] = {}
    for part, names in PARTS.items():
        chosen = {n: fields[n] for n in names if n in fields}
        if chosen:
            out[part] = chosen
    unknown = sorted(set(fields) - set(_PART_OF))
    if unknown:
        raise KeyError(f"not recipe fields: {unknown}")
    return out

"""Which training path uses which recipe field: one table, so that no setting is ignored.

An :class:`~headwise.intent.training.recipe.IntentRecipe` carries the settings of every path, and
each path reads only some of them. :data:`USES` says, for every recipe field, which paths
honour it; :data:`SETTING_USES` does the same for the training call's own settings
(``resume``, ``--per-intent-thresholds``, the data-reading options). Before training,
:func:`check_recipe_paths` refuses every setting that the chosen path would not read, with
a message naming the field, its ``headwise train`` option and the path::

    label_smoothing (--label-smoothing) is not used by the tfidf model (TF-IDF n-grams and
    a linear model); remove it or use the from-scratch Transformer (--model transformer),
    the BiLSTM (--model bilstm) or a pretrained encoder (--model pretrained:DIR)

A field left at its default is never refused; ``explicit`` names the fields the user set
on purpose (a ``--config`` file's keys, the command-line options given), which are refused
even at their default value, since what a user typed should not be dropped in silence.
:data:`NEEDS` adds the fields that only mean something beside another one (``probe_c``
without ``linear_probe``).

The paths (:data:`PATHS`): ``transformer``, ``bilstm`` (from scratch), ``tfidf``,
``pretrained`` (``pretrained:DIR``), and compound (multi-label intents + slots) training
of the Transformer (``compound``) or of a pretrained encoder (``compound:pretrained``).
Ensembles and soups are no training path: ``headwise ensemble`` and ``headwise soup``
combine saved classifiers and take no recipe; each member was trained on one of these.
A new field or path is declared here, in :data:`USES`, and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["COMPOUND", "COMPOUND_PRETRAINED", "NEEDS", "OPTIONS", "PATHS", "SETTING_USES",
           "USES", "check_recipe_paths", "check_valid_fraction", "field_default",
           "kind_paths", "recipe_path"]

TRANSFORMER, BILSTM, TFIDF, PRETRAINED = "transformer", "bilstm", "tfidf", "pretrained"
COMPOUND, COMPOUND_PRETRAINED = "compound", "compound:pretrained"

#: every training path and how a message names it
PATHS: dict[str, str] = {
    TRANSFORMER: "the from-scratch Transformer",
    BILSTM: "the BiLSTM",
    TFIDF: "the tfidf model (TF-IDF n-grams and a linear model)",
    PRETRAINED: "a pretrained encoder (its architecture and tokenizer are the checkpoint's)",
    COMPOUND: "compound (multi-label) training of the Transformer",
    COMPOUND_PRETRAINED: "compound (multi-label) training of a pretrained encoder",
}
#: the short names of the paths, in suggestions
_SHORT: dict[str, str] = {
    TRANSFORMER: "the from-scratch Transformer", BILSTM: "the BiLSTM",
    TFIDF: "the TF-IDF model", PRETRAINED: "a pretrained encoder",
    COMPOUND: "compound training of the Transformer",
    COMPOUND_PRETRAINED: "compound training of a pretrained encoder",
}
#: how ``headwise train`` chooses each path
_CHOOSE: dict[str, str] = {
    TRANSFORMER: "--model transformer", BILSTM: "--model bilstm", TFIDF: "--model tfidf",
    PRETRAINED: "--model pretrained:DIR", COMPOUND: "--multi-label --model transformer",
    COMPOUND_PRETRAINED: "--multi-label --model pretrained:DIR",
}
_COMPOUNDS = frozenset({COMPOUND, COMPOUND_PRETRAINED})
_ALL = frozenset(PATHS)
_NETWORKS = _ALL - {TFIDF}
_SINGLE = _ALL - _COMPOUNDS
_SINGLE_NETWORKS = _SINGLE - {TFIDF}
_SCRATCH = frozenset({TRANSFORMER, BILSTM, COMPOUND})  # a tokenizer trained on the texts
_TRANSFORMERS = frozenset({TRANSFORMER, COMPOUND})
_PRETRAINEDS = frozenset({PRETRAINED, COMPOUND_PRETRAINED})
_SHAPE = ("d_model", "num_layers", "num_heads", "d_ff", "fusion", "norm", "position",
          "pooling", "attention_dropout")
_TRAINING = ("epochs", "batch_size", "lr", "weight_decay", "warmup_ratio", "schedule",
             "patience", "label_smoothing")

#: for every recipe field, the paths that honour it
USES: dict[str, frozenset[str]] = {
    "model": _ALL,
    "tokenizer": _SCRATCH,
    "vocab_size": _SCRATCH,
    "max_length": _NETWORKS,
    **dict.fromkeys(_SHAPE, _TRANSFORMERS),
    "dropout": _SCRATCH,
    "lstm_embed_dim": frozenset({BILSTM}),
    "lstm_hidden": frozenset({BILSTM}),
    "lstm_pooling": frozenset({BILSTM}),
    **dict.fromkeys(_TRAINING, _NETWORKS),  # compound: label smoothing of the intent head
    "seed": _ALL,
    "gce_q": _SINGLE_NETWORKS,
    "distill": _SINGLE_NETWORKS,
    "distill_weight": _SINGLE_NETWORKS,
    "blend": _SINGLE_NETWORKS,
    "select_on": _SINGLE_NETWORKS,  # compound selects on intent F1 + slot F1
    "input_prefix": _PRETRAINEDS,
    "trim_vocab": _PRETRAINEDS,
    "pretrain_epochs": _TRANSFORMERS,
    "pretrain_lr": _TRANSFORMERS,
    "pretrain_mask_prob": _TRANSFORMERS,
    "linear_probe": frozenset({TRANSFORMER, PRETRAINED}),
    "probe_c": frozenset({TRANSFORMER, PRETRAINED}),
    "tfidf_c": _SINGLE,  # a network's only beside blend='tfidf' (NEEDS)
    "prior_correction": _SINGLE,
    "label_cleaning": _SINGLE,
    "class_weighting": _ALL,  # compound: balanced positives and negatives of each intent
    "valid_fraction": _ALL,
    "max_reject": _SINGLE,  # compound thresholds are tuned for F1
    "reject_budget": _SINGLE,
    "reject_confidence": _SINGLE,
    "ood_detector": _SINGLE_NETWORKS,
    "model_overrides": _SCRATCH | {COMPOUND_PRETRAINED},
    "progress": _ALL,
}
#: the training call's settings beyond the recipe (``headwise train`` options), and the
#: paths that honour them
SETTING_USES: dict[str, frozenset[str]] = {
    "resume": _NETWORKS,  # a TF-IDF fit has no checkpoints
    "keep_checkpoints": _NETWORKS,
    "per_intent_thresholds": _COMPOUNDS,
    "no_slots": _COMPOUNDS,
    "format": _SINGLE,  # compound data is JSON lines of annotated examples
    "text_column": _SINGLE,
    "label_column": _SINGLE,
}
#: the ``headwise train`` option of a field or setting, for the messages
OPTIONS: dict[str, str] = {
    "model": "--model", "epochs": "--epochs", "seed": "--seed", "progress": "--quiet",
    "model_overrides": "--number-heads/--negation-heads", "pretrain_epochs": "--pretrain-epochs",
    "linear_probe": "--linear-probe", "valid_fraction": "--no-valid",
    "label_smoothing": "--label-smoothing", "resume": "--resume",
    "keep_checkpoints": "--keep-checkpoints", "per_intent_thresholds": "--per-intent-thresholds",
    "no_slots": "--no-slots", "format": "--format", "text_column": "--text-column",
    "label_column": "--label-column", "blend": "--blend",
}
#: fields that mean something only beside another: field -> (what it needs, whether the
#: recipe has it)
NEEDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "distill_weight": ("distill='tfidf'", lambda r: r.distill != "none"),
    "tfidf_c": ("model 'tfidf' or blend='tfidf' (--blend tfidf)",
                lambda r: r.kind == "tfidf" or r.blend == "tfidf"),
    "pretrain_lr": ("pretrain_epochs above 0 (--pretrain-epochs)", lambda r: r.pretrain_epochs > 0),
    "pretrain_mask_prob": ("pretrain_epochs above 0 (--pretrain-epochs)",
                           lambda r: r.pretrain_epochs > 0),
    "probe_c": ("linear_probe (--linear-probe; a pretrained encoder's default)",
                lambda r: bool(r.linear_probe) or (r.linear_probe is None
                                                   and r.kind == PRETRAINED)),
    "vocab_size": ("a WordPiece tokenizer (tokenizer 'auto' or 'wordpiece'; a character "
                   "vocabulary takes what it needs)", lambda r: r.tokenizer != "char"),
}


def recipe_path(recipe: Any, *, compound: bool = False) -> str:
    """The training path of ``recipe``: its model kind (``transformer``, ``bilstm``,
    ``tfidf``, ``pretrained``), or with ``compound`` the compound path of that kind.

    Raises:
        ValueError: compound training of a BiLSTM or a TF-IDF model (there is none).
    """
    kind = recipe.kind
    if not compound:
        return kind
    if kind not in (TRANSFORMER, PRETRAINED):
        what = "the BiLSTM" if kind == BILSTM else "a TF-IDF model"
        raise ValueError(f"compound (multi-label) training needs a Transformer or a pretrained "
                         f"encoder, not {what}")
    return COMPOUND if kind == TRANSFORMER else COMPOUND_PRETRAINED


def kind_paths(kind: str) -> frozenset[str]:
    """The paths a recipe of model ``kind`` can train on (single-label, and compound for the
    Transformer and pretrained encoders)."""
    extra = {TRANSFORMER: COMPOUND, PRETRAINED: COMPOUND_PRETRAINED}.get(kind)
    return frozenset({kind} | ({extra} if extra else set()))


def field_default(recipe: Any, name: str) -> Any:
    """The default value of the dataclass field ``name`` of ``recipe``."""
    f = next(f for f in dataclasses.fields(recipe) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


def _named(name: str) -> str:
    return f"{name} ({OPTIONS[name]})" if name in OPTIONS else name


def _unused(name: str, uses: frozenset[str], paths: frozenset[str]) -> str:
    where = " or ".join(PATHS[p] for p in sorted(paths, key=list(PATHS).index))
    # suggest the honouring paths of the same sort (single-label or compound) first
    compound = paths <= _COMPOUNDS
    same = [p for p in PATHS if p in uses and (p in _COMPOUNDS) == compound]
    if same:
        hints = [f"{_SHORT[p]} ({_CHOOSE[p]})" for p in same]
    elif compound:  # a single-label field on a compound path
        hints = ["single-label training (without --multi-label)"]
    elif uses:
        hints = [f"{_SHORT[p]} ({_CHOOSE[p]})" for p in PATHS if p in uses]
    else:
        return f"{_named(name)} is not used by {where}; remove it"
    alternatives = hints[0] if len(hints) == 1 else ", ".join(hints[:-1]) + " or " + hints[-1]
    return f"{_named(name)} is not used by {where}; remove it or use {alternatives}"


def check_recipe_paths(recipe: Any, paths: Iterable[str], *, explicit: Iterable[str] = (),
                       settings: Iterable[str] = ()) -> None:
    """Refuse every recipe field and call setting that none of ``paths`` uses.

    Args:
        recipe: an :class:`~headwise.intent.training.recipe.IntentRecipe`.
        paths: the training path (or, before the path is known, every path the recipe's
            model kind can take: :func:`kind_paths`).
        explicit: fields set on purpose (a config file's keys, the command-line options
            given): refused even at their default value. Other fields are refused only
            when they differ from their default.
        settings: the names of the call settings given (:data:`SETTING_USES`: ``resume``,
            ``per_intent_thresholds``, ...).

    Raises:
        ValueError: naming the first unused field (its option) and the path, and how many
            more there are; or a field of :data:`NEEDS` without what it needs.
        KeyError: a field or setting missing from the tables (a programming error: declare
            it in :data:`USES` or :data:`SETTING_USES`).
    """
    paths = frozenset(paths)
    unknown_paths = paths - _ALL
    if unknown_paths or not paths:
        raise ValueError(f"unknown training paths {sorted(unknown_paths)}; known: {list(PATHS)}")
    explicit = set(explicit)
    problems: list[str] = []
    for f in dataclasses.fields(recipe):
        name = f.name
        if name not in USES:
            raise KeyError(f"recipe field {name!r} has no entry in "
                           f"headwise.intent.training.recipe_paths.USES: declare the paths "
                           f"that use it")
        value = getattr(recipe, name)
        changed = name in explicit or value != field_default(recipe, name)
        if changed and not USES[name] & paths:
            problems.append(_unused(name, USES[name], paths))
        elif changed and name in NEEDS and not NEEDS[name][1](recipe):
            problems.append(f"{_named(name)} is used only with {NEEDS[name][0]}; remove it "
                            f"or set that too")
    for name in settings:
        if not SETTING_USES[name] & paths:
            problems.append(_unused(name, SETTING_USES[name], paths))
    if problems:
        more = f" (and {len(problems) - 1} more: {'. '.join(problems[1:])})" \
            if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)


def check_valid_fraction(recipe: Any, valid_given: bool, *, explicit: Iterable[str] = ()
                         ) -> None:
    """Refuse a ``valid_fraction`` other than the default (or set on purpose) when
    validation data is given: the fraction is held out only when there is none.

    Raises:
        ValueError: naming ``valid_fraction`` and ``--no-valid``.
    """
    if valid_given and ("valid_fraction" in set(explicit) or recipe.valid_fraction
                        != field_default(recipe, "valid_fraction")):
        raise ValueError(f"{_named('valid_fraction')} is not used when validation data is "
                         f"given (--valid): the fraction is held out of the training data "
                         f"only without it; remove one of the two")


def recipe_table(recipe_type: type) -> str:
    """The recipe's fields as a Markdown table: name, default, the paths that use it (from
    :data:`USES`) and what it does (the first sentence of its entry in the recipe class's
    docstring). docs/recipe.md holds it, and a test checks that it is this table, so that the
    two never drift apart.

    Args:
        recipe_type: :class:`~headwise.intent.training.recipe.IntentRecipe` (passed in, as
            the recipe is everywhere in this module: the recipe checks its fields with this
            module, which therefore does not import it).
    """
    import re

    doc = (recipe_type.__doc__ or "").split("Args:", 1)[1]
    chunks: list[str] = []  # one per entry: its lines joined
    for line in doc.splitlines():
        if re.match(r"^ {8}\S", line):
            chunks.append(line.strip())
        elif line.startswith(" " * 12) and chunks:
            chunks[-1] += " " + line.strip()
    entries: dict[str, str] = {}
    for chunk in chunks:
        head = re.match(r"^([\w, ]+):\s+(.*)$", chunk)
        if head:
            for n in (x.strip() for x in head.group(1).split(",")):
                entries[n] = head.group(2)
    order = ("transformer", "bilstm", "tfidf", "pretrained", "compound", "compound:pretrained")
    rows = ["| field | default | used by | what it does |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(recipe_type):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        text = re.sub(r":(?:class|func|data|mod|meth):`~?([^`]+)`",
                      lambda m: "``" + m.group(1).rsplit(".", 1)[-1].strip() + "``",
                      entries.get(f.name, ""))
        sentence = _first_sentence(text)
        sentence = sentence.replace("``", "`").replace("|", "\\|")
        uses = USES[f.name]
        where = "all" if uses == _ALL else ", ".join(p for p in order if p in uses)
        rows.append(f"| `{f.name}` | `{json_default(default)}` | {where} | {sentence} |")
    return "\n".join(rows)


def json_default(value: Any) -> str:
    """A default value as it is written in a ``--config`` JSON file."""
    import json

    return json.dumps(value, ensure_ascii=False)


def _first_sentence(text: str) -> str:
    """``text`` up to its first ``. `` or ``; `` outside parentheses and code."""
    depth, code = 0, False
    for i, ch in enumerate(text):
        if text.startswith("``", i):
            code = not code
        elif not code and ch in "([":
            depth += 1
        elif not code and ch in ")]":
            depth = max(depth - 1, 0)
        elif not code and depth == 0 and ch in ".;" and text[i + 1:i + 2] in (" ", ""):
            return text[:i + 1] if ch == "." else text[:i]
    return text

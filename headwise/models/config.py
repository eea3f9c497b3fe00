"""One configuration dataclass for every headwise model, saved as JSON, with presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODEL_TYPES = ("encoder_classifier", "seq2seq", "bilstm", "joint_intent_slot",
               "bilstm_joint")
#: the model types whose encoder is a BiLSTM (the ``lstm_*`` fields; no attention heads)
LSTM_TYPES = ("bilstm", "bilstm_joint")
#: which queries of a negation-aware head get its bias towards a negation cue
NEGATION_SCOPES = ("message", "clause")


@dataclass
class ModelConfig:
    """Everything needed to rebuild a model; stored as ``config.json`` beside the weights.

    ``number_heads`` (encoder models) names the heads of every encoder layer that get a
    learned score bias towards number-token keys (:class:`~headwise.attention.number_bias.
    NumberKeyBias`), starting at ``number_bias_init`` (1.0: the chosen heads start with
    ``e`` times the attention on numbers, and training may undo it); which vocabulary ids
    are numbers is a buffer of the encoder, set from the tokenizer with
    ``set_number_tokens``. ``negation_heads`` / ``negation_bias_init`` do the same for
    negation-cue keys (ids from :func:`~headwise.text.negation_tokens.negation_token_ids`,
    set with ``set_negation_tokens``). ``negation_scope`` says which queries get that
    bias: ``"message"`` every query, towards every cue of the text; ``"clause"`` only the
    queries of the cue's own clause (clause-break ids set with ``set_clause_breaks``,
    from :func:`~headwise.text.negation_tokens.clause_break_token_ids`), so the tokens of
    a request taken back carry the cue and those of the request kept do not
    ("不是要注销卡，是要解冻"). ``multi_label``, ``slot_tags`` (BIO tag names)
    and ``slot_loss_weight`` describe the joint intent + slot models (``joint_intent_slot``
    on a Transformer, ``bilstm_joint`` on a BiLSTM).

    ``positions_from_padding`` numbers learned positions as RoBERTa and XLM-R do: real
    tokens from ``pad_token_id + 1``, padding at ``pad_token_id`` (so ``max_position`` is
    the longest input plus ``pad_token_id + 1``).

    ``conv_kernel`` (encoder models; 0 for none) puts a depthwise convolution of that odd
    width over the token embeddings before the first layer
    (:class:`~headwise.nn.DepthwiseConvolution`): each channel of a token mixes its
    neighbours' values, an n-gram reading from the first step.

    ``kept_vocab_size`` is a trimmed vocabulary: the token table keeps that many rows and
    maps every one of the ``vocab_size`` ids to a row (:mod:`headwise.models.vocab_trim`).

    Transformer fields follow the papers' names (d_model, d_ff, num_heads). The BiLSTM
    baseline (``bilstm``, and ``bilstm_joint`` with the joint fields) uses ``vocab_size``,
    ``num_labels``, ``dropout``, ``pad_token_id`` and the ``lstm_*`` fields.
    """

    model_type: str = "encoder_classifier"
    vocab_size: int = 8000
    kept_vocab_size: int | None = None
    d_model: int = 256
    num_layers: int = 4
    num_decoder_layers: int = 0
    num_heads: int = 8
    num_kv_heads: int | None = None
    d_ff: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation: str = "gelu"
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_first: bool = True
    position: str = "learned"
    max_position: int = 512
    positions_from_padding: bool = False
    type_vocab_size: int = 0
    embedding_norm: bool = False
    scale_embeddings: bool = False
    fusion: str = "concat"
    bias: bool = True
    backend: str = "auto"
    attention_pattern: dict[str, Any] | None = None
    conv_kernel: int = 0
    pooling: str = "cls"
    number_heads: list[int] | None = None
    number_bias_init: float = 1.0
    negation_heads: list[int] | None = None
    negation_bias_init: float = 1.0
    negation_scope: str = "message"
    multi_label: bool = False
    slot_tags: list[str] | None = None
    slot_loss_weight: float = 1.0
    num_labels: int = 2
    labels: list[str] | None = None
    pad_token_id: int = 0
    bos_token_id: int = 1
    eos_token_id: int = 2
    tie_embeddings: bool = True
    lstm_embed_dim: int = 128
    lstm_hidden: int = 128
    lstm_layers: int = 1
    lstm_pooling: str = "max"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {self.model_type!r}")
        if self.labels is not None and len(self.labels) != self.num_labels:
            raise ValueError(f"{len(self.labels)} label names for num_labels={self.num_labels}")
        if self.model_type not in LSTM_TYPES and self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads "
                             f"({self.num_heads})")
        if self.conv_kernel and (self.conv_kernel < 3 or self.conv_kernel % 2 == 0):
            raise ValueError(f"conv_kernel must be 0 (none) or odd and at least 3, got "
                             f"{self.conv_kernel}")
        if self.negation_scope not in NEGATION_SCOPES:
            raise ValueError(f"negation_scope must be one of {NEGATION_SCOPES}, got "
                             f"{self.negation_scope!r}")
        if self.conv_kernel and self.model_type in LSTM_TYPES:
            raise ValueError(f"conv_kernel is for Transformer encoders, not {self.model_type}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Rebuild from :meth:`to_dict`; unknown keys are an error (a config from
        something else must not load silently)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        """Write as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n",
                              encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        """Read a JSON file written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


#: named presets (shapes from the papers); override any field with :func:`preset`
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab_size=256, d_model=32, num_layers=2, num_heads=4, d_ff=64,
                 max_position=128, dropout=0.0),
    "tiny-seq2seq": dict(model_type="seq2seq", vocab_size=256, d_model=32, num_layers=2,
                         num_decoder_layers=2, num_heads=4, d_ff=64, max_position=128,
                         dropout=0.0, position="sinusoidal", scale_embeddings=True),
    # "Attention Is All You Need", base model: 6+6 layers, d_model 512, 8 heads, d_ff 2048
    "transformer-base": dict(model_type="seq2seq", vocab_size=16000, d_model=512, num_layers=6,
                             num_decoder_layers=6, num_heads=8, d_ff=2048, dropout=0.1,
                             activation="relu", norm_first=False, position="sinusoidal",
                             scale_embeddings=True, max_position=1024),
    "bert-base": dict(vocab_size=30522, d_model=768, num_layers=12, num_heads=12, d_ff=3072,
                      activation="gelu", norm_first=False, norm_eps=1e-12, position="learned",
                      max_position=512, type_vocab_size=2, embedding_norm=True),
    "minilm-l6": dict(vocab_size=30522, d_model=384, num_layers=6, num_heads=12, d_ff=1536,
                      activation="gelu", norm_first=False, norm_eps=1e-12, position="learned",
                      max_position=512, type_vocab_size=2, embedding_norm=True, pooling="mean"),
    "bilstm": dict(model_type="bilstm", vocab_size=8000, lstm_embed_dim=128, lstm_hidden=128,
                   dropout=0.1),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """A preset config with some fields overridden.

    Raises:
        KeyError: an unknown preset (the message lists the known ones).
    """
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides})

"""Transformer encoder and the encoder classifier (BERT-style, or any core option)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.attention import ALiBi, RotaryEmbedding
from headwise.attention import masks as M
from headwise.attention.number_bias import NumberKeyBias
from headwise.models.config import ModelConfig
from headwise.models.hub import PretrainedMixin
from headwise.models.registry import register_model
from headwise.nn import (
    DepthwiseConvolution,
    Dropout,
    EncoderLayer,
    TransformerEmbeddings,
    build_norm,
    maybe_checkpoint,
)

POOLINGS = ("cls", "mean", "max")


def pattern_from_config(spec: dict[str, Any] | None) -> M.AttentionPattern | None:
    """Build a sparse attention pattern from a config dict; the parts are combined with
    ``|`` (a query may attend where any part allows).

    Keys: ``sliding_window`` (int), ``global_tokens`` (list of positions), ``bigbird``
    (dict of :func:`masks.bigbird` arguments), ``causal`` (bool).

    Raises:
        ValueError: unknown keys or an empty spec.
    """
    if not spec:
        return None
    known = {"sliding_window", "global_tokens", "bigbird", "causal"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(f"unknown attention_pattern keys {unknown}; known: {sorted(known)}")
    parts: list[M.AttentionPattern] = []
    if "sliding_window" in spec:
        parts.append(M.sliding_window(int(spec["sliding_window"])))
    if "global_tokens" in spec:
        parts.append(M.global_tokens(spec["global_tokens"]))
    if "bigbird" in spec:
        parts.append(M.bigbird(**spec["bigbird"]))
    pattern = parts[0] if parts else None
    for p in parts[1:]:
        pattern = pattern | p
    if spec.get("causal"):
        pattern = M.causal() if pattern is None else pattern & M.causal()
    if pattern is None:
        raise ValueError("attention_pattern names no pattern")
    return pattern


def stack_parts(c: ModelConfig, vocab_size: int | None = None, type_vocab_size: int | None = None
                ) -> tuple[TransformerEmbeddings, dict[str, Any]]:
    """The embeddings and the per-layer keyword arguments a config describes (shared by the
    encoder and the decoder stacks; one RotaryEmbedding is shared by all layers)."""
    embeddings = TransformerEmbeddings(
        c.vocab_size if vocab_size is None else vocab_size, c.d_model,
        max_position=c.max_position, position=c.position,
        type_vocab_size=c.type_vocab_size if type_vocab_size is None else type_vocab_size,
        norm=c.norm if c.embedding_norm else None, norm_eps=c.norm_eps, dropout=c.dropout,
        pad_token_id=c.pad_token_id, scale=c.scale_embeddings,
        positions_from_padding=c.positions_from_padding,
        kept_vocab_size=c.kept_vocab_size if vocab_size is None else None)
    rope = RotaryEmbedding(c.d_model // c.num_heads, max_len=c.max_position) \
        if c.position == "rope" else False
    layer = dict(num_kv_heads=c.num_kv_heads, dropout=c.dropout,
                 attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
                 activation=c.activation, norm=c.norm, norm_eps=c.norm_eps,
                 norm_first=c.norm_first, fusion=c.fusion, rope=rope, backend=c.backend,
                 bias=c.bias)
    return embeddings, layer


class TransformerEncoder(nn.Module):
    """Embeddings, ``num_layers`` encoder layers, and a final norm for pre-norm stacks."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.embeddings, layer = stack_parts(c)
        self.layers = nn.ModuleList(EncoderLayer(c.d_model, c.num_heads, c.d_ff, **layer)
                                    for _ in range(c.num_layers))
        self.final_norm = build_norm(c.norm, c.d_model, c.norm_eps) if c.norm_first else None
        self.pattern = pattern_from_config(c.attention_pattern)
        self.alibi = ALiBi(c.num_heads) if c.position == "alibi" else None
        self.local_conv = DepthwiseConvolution(c.d_model, c.conv_kernel) if c.conv_kernel \
            else None
        self.gradient_checkpointing = False
        self.number_bias: nn.ModuleList | None = None
        if c.number_heads:
            self.number_bias = nn.ModuleList(
                NumberKeyBias(c.num_heads, c.number_heads, init=c.number_bias_init)
                for _ in range(c.num_layers))
            self.register_buffer("is_number_token", torch.zeros(c.vocab_size, dtype=torch.bool))
        self.negation_bias: nn.ModuleList | None = None
        if c.negation_heads:
            self.negation_bias = nn.ModuleList(
                NumberKeyBias(c.num_heads, c.negation_heads, init=c.negation_bias_init)
                for _ in range(c.num_layers))
            self.register_buffer("is_negation_token",
                                 torch.zeros(c.vocab_size, dtype=torch.bool))
            if c.negation_scope == "clause":
                self.register_buffer("is_clause_break",
                                     torch.zeros(c.vocab_size, dtype=torch.bool))

    @property
    def has_score_bias(self) -> bool:
        """Whether the layers add a bias to the attention scores: ALiBi positions, or a
        learned bias of some heads on number or negation keys."""
        return self.alibi is not None or self.number_bias is not None \
            or self.negation_bias is not None

    def set_number_tokens(self, token_ids: list[int] | Tensor) -> None:
        """Mark which vocabulary ids are number tokens (for the ``number_heads`` bias).

        Raises:
            ValueError: the config names no ``number_heads``, or an id is out of range.
        """
        if self.number_bias is None:
            raise ValueError("this encoder has no number_heads; set them in the config")
        self._set_flags(self.is_number_token, token_ids, "number")

    def set_negation_tokens(self, token_ids: list[int] | Tensor) -> None:
        """Mark which vocabulary ids are negation cues (for the ``negation_heads`` bias).

        Raises:
            ValueError: the config names no ``negation_heads``, or an id is out of range.
        """
        if self.negation_bias is None:
            raise ValueError("this encoder has no negation_heads; set them in the config")
        self._set_flags(self.is_negation_token, token_ids, "negation")

    def set_clause_breaks(self, token_ids: list[int] | Tensor) -> None:
        """Mark which vocabulary ids end a clause: the scope of a negation cue for heads
        scoped to the clause (``negation_scope="clause"``).

        Raises:
            ValueError: the config's negation heads are not scoped to the clause, or an id
                is out of range.
        """
        if self.negation_bias is None or self.config.negation_scope != "clause":
            raise ValueError("this encoder's negation heads are not scoped to the clause; set "
                             "negation_heads and negation_scope='clause' in the config")
        self._set_flags(self.is_clause_break, token_ids, "clause-break")

    def negation_flags(self, input_ids: Tensor) -> Tensor | None:
        """Where the negation-aware heads put their bias: (batch, seq) True at cue keys
        (``negation_scope="message"``), or (batch, seq, seq) True where query ``i`` and
        cue key ``j`` lie in one clause (``"clause"``: clauses end at a clause break,
        which belongs to the clause it ends); None without negation heads."""
        if self.negation_bias is None:
            return None
        is_cue = self.is_negation_token[input_ids]
        if self.config.negation_scope == "message":
            return is_cue
        ends = self.is_clause_break[input_ids].long()
        clause = ends.cumsum(1) - ends
        return (clause[:, :, None] == clause[:, None, :]) & is_cue[:, None, :]

    @staticmethod
    def _set_flags(buffer: Tensor, token_ids: list[int] | Tensor, what: str) -> None:
        ids = torch.as_tensor(token_ids, dtype=torch.long).flatten()
        vocab = buffer.numel()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            raise ValueError(f"{what} token ids must lie in [0, {vocab})")
        flags = torch.zeros_like(buffer)
        flags[ids] = True
        buffer.copy_(flags)

    def attention_mask_for(self, attention_mask: Tensor | None, seq: int):
        """The mask the layers get: padding (and the configured sparse pattern)."""
        keep = None
        if attention_mask is not None:
            if attention_mask.shape[-1] != seq or attention_mask.ndim != 2:
                raise ValueError(f"attention_mask must be (batch, {seq}), got "
                                 f"{tuple(attention_mask.shape)}")
            keep = attention_mask.bool()
            if bool(keep.all()):
                keep = None
        if keep is None:
            return self.pattern
        padding = M.key_padding(keep)  # one row of keys per batch row, straight onto SDPA
        return padding if self.pattern is None else self.pattern & padding

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        """input_ids (batch, seq) -> last hidden states (batch, seq, d_model).

        Args:
            input_ids: token ids.
            attention_mask: (batch, seq), 1/True for real tokens, 0 for padding.
            token_type_ids: segment ids (BERT), default zeros.
        """
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (batch, seq), got {tuple(input_ids.shape)}")
        mask = self.attention_mask_for(attention_mask, input_ids.shape[1])
        return self.run(input_ids, mask, token_type_ids)

    def run(self, input_ids: Tensor, mask: Any, token_type_ids: Tensor | None = None) -> Tensor:
        """Embeddings (and the depthwise convolution over them, if any: padding is read from
        ``pad_token_id``), the layers (with the score biases, if any: ALiBi, the number- and
        negation-key biases) and the final norm, under a mask already built
        (:meth:`attention_mask_for`, or any mask the layers take: the ONNX export passes
        the padding mask as a tensor, always)."""
        x = self.embeddings(input_ids, token_type_ids)
        if self.local_conv is not None:
            x = self.local_conv(x, input_ids != self.config.pad_token_id)
        is_number = self.is_number_token[input_ids] if self.number_bias is not None else None
        is_negation = self.negation_flags(input_ids)
        seq = input_ids.shape[1]
        alibi = self.alibi(seq, seq, device=input_ids.device) if self.alibi is not None \
            else None
        for i, layer in enumerate(self.layers):
            bias = alibi
            if is_number is not None:
                extra = self.number_bias[i](is_number)
                bias = extra if bias is None else bias + extra
            if is_negation is not None:
                extra = self.negation_bias[i](is_negation)
                bias = extra if bias is None else bias + extra
            if bias is not None:
                bias = bias.to(x.dtype)
            x = maybe_checkpoint(self.gradient_checkpointing and self.training, layer, x, mask,
                                 bias=bias)
        return self.final_norm(x) if self.final_norm is not None else x


class EncoderClassifier(PretrainedMixin, nn.Module):
    """A Transformer encoder with a classification head over the pooled sequence.

    ``forward(input_ids, attention_mask=None, token_type_ids=None, labels=None)`` returns
    ``{"logits": (batch, num_labels)}`` plus ``"loss"`` (cross-entropy) when labels are
    given — the contract the Trainer trains. ``encode`` returns the last hidden states.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {config.pooling!r}")
        self.config = config
        self.encoder = TransformerEncoder(config)
        self.dropout = Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None,
               token_type_ids: Tensor | None = None) -> Tensor:
        """Last hidden states (batch, seq, d_model)."""
        return self.encoder(input_ids, attention_mask, token_type_ids)

    def pool(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """(batch, seq, d) -> (batch, d): the first token (CLS), the mean of real tokens, or
        their element-wise maximum (``"max"``, the BiLSTM's pooling: one strong token, a
        negation cue, is not averaged away)."""
        if self.config.pooling == "cls":
            return hidden[:, 0]
        if self.config.pooling == "max":
            return max_pool(hidden, attention_mask)
        return mean_pool(hidden, attention_mask)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None,
                labels: Tensor | None = None) -> dict[str, Tensor]:
        """Logits (and the loss when ``labels`` are given)."""
        pooled = self.pool(self.encode(input_ids, attention_mask, token_type_ids), attention_mask)
        logits = self.classifier(self.dropout(pooled))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.float(), labels)
        return out

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute each encoder layer's activations in the backward pass (less memory)."""
        self.encoder.gradient_checkpointing = bool(enabled)


register_model("encoder_classifier", EncoderClassifier)


def max_pool(hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Element-wise maximum of the hidden states over real tokens (Collobert et al. 2011),
    padding filled with the dtype's lowest value as the BiLSTM's and the chunk pooling's
    maximum fill it with -inf (finite here: the ONNX export stays exact); a row without a
    real token has no maximum and pools to that value (a tokenized text always has its
    special tokens). Nothing follows the maximum: onnxruntime's fused graph aborted on a
    one-token batch when an operator did."""
    if attention_mask is None:
        return hidden.amax(1)
    low = torch.finfo(hidden.dtype).min
    return hidden.masked_fill(~attention_mask.bool().unsqueeze(-1), low).amax(1)


def mean_pool(hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Mean of the hidden states over real tokens (sentence-transformers' pooling)."""
    if attention_mask is None:
        return hidden.mean(1)
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(torch.finfo(hidden.dtype).tiny)

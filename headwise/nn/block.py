"""Encoder and decoder layers (Vaswani et al. 2017) with pre- or post-norm residuals.

Post-norm (the original paper, BERT): ``x = Norm(x + Dropout(Sublayer(x)))``.
Pre-norm (GPT-2 onwards, more stable deep): ``x = x + Dropout(Sublayer(Norm(x)))``; a
stack of pre-norm layers ends with one more norm (the model adds it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from headwise.attention import KVCache, MultiHeadAttention, RotaryEmbedding
from headwise.attention.masks import AttentionPattern
from headwise.nn.dropout import Dropout
from headwise.nn.feedforward import build_feedforward
from headwise.nn.norm import build_norm

Mask = Tensor | AttentionPattern | None


def maybe_checkpoint(enabled: bool, fn: Callable[..., Tensor], *args, **kwargs) -> Tensor:
    """Run ``fn(*args, **kwargs)``, recomputing its activations in the backward pass when
    ``enabled`` and gradients are on (gradient checkpointing, Chen et al. 2016)."""
    if enabled and torch.is_grad_enabled():
        return checkpoint(fn, *args, use_reentrant=False, **kwargs)
    return fn(*args, **kwargs)


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward layer, each in a residual branch.

    Args:
        d_model, num_heads, d_ff: widths and head count.
        num_kv_heads: K/V heads (grouped-query attention), default ``num_heads``.
        dropout: on each sublayer's output (residual dropout).
        attention_dropout: on the attention weights.
        activation_dropout: inside the FFN, after the activation (fairseq's name; BERT and
            the original paper have none, hence 0 by default).
        activation: FFN activation (``gelu``, ``relu``, ``gelu_tanh``, ``silu``) or a GLU
            variant (``swiglu``, ``geglu``, ``reglu``).
        norm: ``"layernorm"`` or ``"rmsnorm"``; ``norm_eps`` its epsilon.
        norm_first: pre-norm (True) or post-norm (False).
        fusion: head fusion of the attention, ``"concat"`` or ``"glu"``.
        rope: rotary embeddings inside attention (True, or a shared RotaryEmbedding).
        backend: attention backend for :func:`headwise.attention.attend`.
        bias: biases in the projections.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *,
                 num_kv_heads: int | None = None, dropout: float = 0.1,
                 attention_dropout: float = 0.0, activation_dropout: float = 0.0,
                 activation: str = "gelu",
                 norm: str = "layernorm", norm_eps: float = 1e-5, norm_first: bool = True,
                 fusion: str = "concat", rope: bool | RotaryEmbedding = False,
                 backend: str = "auto", bias: bool = True) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, num_kv_heads, fusion,
                                       attention_dropout, rope=rope, backend=backend, bias=bias)
        self.ffn = build_feedforward(activation, d_model, d_ff, activation_dropout, bias)
        self.norm1 = build_norm(norm, d_model, norm_eps)
        self.norm2 = build_norm(norm, d_model, norm_eps)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask: Mask = None, *, bias: Tensor | None = None,
                positions: Tensor | None = None) -> Tensor:
        """x: (batch, seq, d_model) -> same shape. ``mask``/``bias`` go to the attention."""
        if self.norm_first:
            x = x + self.dropout(self.attn(self.norm1(x), mask=mask, bias=bias,
                                           positions=positions))
            return x + self.dropout(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout(self.attn(x, mask=mask, bias=bias, positions=positions)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the encoder output, feed-forward.

    Same arguments as :class:`EncoderLayer`. ``forward`` takes the layer's two caches for
    incremental decoding (a KVCache for self-attention, one for the projected memory).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *,
                 num_kv_heads: int | None = None, dropout: float = 0.1,
                 attention_dropout: float = 0.0, activation_dropout: float = 0.0,
                 activation: str = "gelu",
                 norm: str = "layernorm", norm_eps: float = 1e-5, norm_first: bool = True,
                 fusion: str = "concat", rope: bool | RotaryEmbedding = False,
                 backend: str = "auto", bias: bool = True) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, num_kv_heads, fusion,
                                            attention_dropout, rope=rope, backend=backend,
                                            bias=bias)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, num_kv_heads, fusion,
                                             attention_dropout, backend=backend, bias=bias)
        self.ffn = build_feedforward(activation, d_model, d_ff, activation_dropout, bias)
        self.norm1 = build_norm(norm, d_model, norm_eps)
        self.norm2 = build_norm(norm, d_model, norm_eps)
        self.norm3 = build_norm(norm, d_model, norm_eps)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Mask = None,
                memory_mask: Mask = None, *, self_cache: KVCache | None = None,
                memory_cache: KVCache | None = None,
                positions: Tensor | None = None) -> Tensor:
        """x: (batch, tgt_len, d_model); memory: (batch, src_len, d_model).

        Args:
            self_mask: mask of the self-attention (e.g. ``masks.causal()``); with a
                ``self_cache`` causality is implied and this may stay None.
            memory_mask: which source positions may be attended (padding).
            self_cache, memory_cache: KV caches for incremental decoding.
            positions: absolute target positions (RoPE).
        """
        def sa(h):
            return self.self_attn(h, mask=self_mask, cache=self_cache, positions=positions)

        def ca(h):
            return self.cross_attn(h, context=memory, mask=memory_mask, cache=memory_cache)

        if self.norm_first:
            x = x + self.dropout(sa(self.norm1(x)))
            x = x + self.dropout(ca(self.norm2(x)))
            return x + self.dropout(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.dropout(sa(x)))
        x = self.norm2(x + self.dropout(ca(x)))
        return self.norm3(x + self.dropout(self.ffn(x)))

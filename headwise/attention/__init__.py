"""The attention core: masks, positions, biases, kernels, multi-head attention, cache, capture,
and the dropout its kernels and the models above share.

Pure tensor code on PyTorch; nothing here reads files or text.
"""

from headwise.attention import masks
from headwise.attention.bias import ALiBi, T5RelativePositionBias, alibi_slopes
from headwise.attention.cache import KVCache
from headwise.attention.capture import AttentionCapture, capture_attention
from headwise.attention.dropout import dropout
from headwise.attention.kernels import BACKENDS, attend, select_backend
from headwise.attention.linear import linear_attention
from headwise.attention.lsh import lsh_attention
from headwise.attention.masks import AttentionPattern
from headwise.attention.mha import MultiHeadAttention
from headwise.attention.positions import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    positions_from_padding,
)

__all__ = [
    "ALiBi",
    "AttentionCapture",
    "AttentionPattern",
    "BACKENDS",
    "KVCache",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "positions_from_padding",
    "T5RelativePositionBias",
    "alibi_slopes",
    "apply_rotary",
    "attend",
    "capture_attention",
    "dropout",
    "linear_attention",
    "lsh_attention",
    "masks",
    "select_backend",
]

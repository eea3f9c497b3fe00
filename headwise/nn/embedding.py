"""Token + position (+ segment) embeddings at the bottom of a Transformer."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headwise.attention import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    positions_from_padding,
)
from headwise.nn.dropout import Dropout
from headwise.nn.norm import build_norm

POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")


class TransformerEmbeddings(nn.Module):
    """``Dropout(Norm(E_tok[x] * s + P[pos] + E_seg[type]))``.

    Args:
        vocab_size, d_model: table size and width.
        max_position: longest sequence for learned positions.
        position: ``"learned"`` (BERT), ``"sinusoidal"`` (the original paper), or
            ``"rope"``/``"alibi"``/``"none"`` (no additive positions: RoPE and ALiBi act
            inside attention).
        type_vocab_size: segment (token type) embeddings, 0 for none.
        norm: ``"layernorm"``/``"rmsnorm"`` after the sum (BERT), or None.
        norm_eps: epsilon of that norm.
        dropout: on the result.
        pad_token_id: its embedding row starts at zero.
        scale: multiply token embeddings by ``sqrt(d_model)`` (the original paper).
        positions_from_padding: RoBERTa / XLM-R positions for ``"learned"``: real tokens
            count from ``pad_token_id + 1`` and padding sits at ``pad_token_id``
            (:func:`~headwise.attention.positions_from_padding`); the table then needs
            ``max_position = longest input + pad_token_id + 1`` rows.
        kept_vocab_size: a trimmed vocabulary (:func:`~headwise.models.vocab_trim.
            trim_vocabulary`): the table has this many rows and the buffer ``token_rows``
            (``vocab_size`` entries) maps every token id to its row; ids are unchanged
            outside the model.
    """

    def __init__(self, vocab_size: int, d_model: int, *, max_position: int = 512,
                 position: str = "learned", type_vocab_size: int = 0, norm: str | None = None,
                 norm_eps: float = 1e-12, dropout: float = 0.1, pad_token_id: int = 0,
                 scale: bool = False, positions_from_padding: bool = False,
                 kept_vocab_size: int | None = None) -> None:
        super().__init__()
        if position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
        if positions_from_padding and position != "learned":
            raise ValueError(f"positions_from_padding needs learned positions, got "
                             f"position={position!r}")
        self.pad_token_id = pad_token_id
        self.positions_from_padding = positions_from_padding
        self.vocab_size = vocab_size
        if kept_vocab_size is None:
            self.register_buffer("token_rows", None)
            self.word_embeddings = nn.Embedding(vocab_size, d_model, padding_idx=pad_token_id)
            nn.init.normal_(self.word_embeddings.weight, std=0.02)
            with torch.no_grad():
                self.word_embeddings.weight[pad_token_id].zero_()
        else:
            if not 0 < kept_vocab_size <= vocab_size:
                raise ValueError(f"kept_vocab_size must be in [1, {vocab_size}], got "
                                 f"{kept_vocab_size}")
            # padding rows get no special treatment: padded positions never reach a real one
            self.word_embeddings = nn.Embedding(kept_vocab_size, d_model)
            nn.init.normal_(self.word_embeddings.weight, std=0.02)
            self.register_buffer("token_rows", torch.zeros(vocab_size, dtype=torch.long))
        self.position = position
        self.position_embeddings: nn.Module | None = None
        if position == "learned":
            self.position_embeddings = LearnedPositionalEmbedding(max_position, d_model)
        elif position == "sinusoidal":
            self.position_embeddings = SinusoidalPositionalEncoding(d_model, max_position)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, d_model) \
            if type_vocab_size else None
        if self.token_type_embeddings is not None:
            nn.init.normal_(self.token_type_embeddings.weight, std=0.02)
        self.norm = build_norm(norm, d_model, norm_eps) if norm else None
        self.dropout = Dropout(dropout)
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                offset: int = 0) -> Tensor:
        """input_ids: (batch, seq) -> (batch, seq, d_model); ``offset`` shifts positions
        (incremental decoding)."""
        rows = input_ids if self.token_rows is None else self.token_rows[input_ids]
        x = self.word_embeddings(rows)
        if self.scale != 1.0:
            x = x * self.scale
        if self.positions_from_padding:
            if offset:
                raise ValueError("positions_from_padding takes no offset (an encoder only)")
            x = self.position_embeddings.add_at(x, positions_from_padding(input_ids,
                                                                          self.pad_token_id))
        elif self.position_embeddings is not None:
            x = self.position_embeddings(x, offset=offset)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)

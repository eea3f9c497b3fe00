"""Tiny models and data for the training tests (imported by tests and by run_tiny.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

VOCAB, NUM_LABELS = 32, 3


class TinyClassifier(nn.Module):
    """Mean-pooled embeddings -> LayerNorm -> tanh MLP -> dropout -> linear head."""

    def __init__(self, dim: int = 16, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=0)
        self.norm = nn.LayerNorm(dim)
        self.hidden = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(dim, NUM_LABELS)
        self.checkpointing = False

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        self.checkpointing = enabled

    def _mlp(self, x: Tensor) -> Tensor:
        return torch.tanh(self.hidden(x))

    def forward(self, input_ids: Tensor, attention_mask: Tensor,
                labels: Tensor | None = None) -> dict[str, Tensor]:
        h = self.embed(input_ids)
        mask = attention_mask.unsqueeze(-1).to(h.dtype)
        x = self.norm((h * mask).sum(1) / mask.sum(1).clamp_min(1.0))
        if self.checkpointing and self.training:
            x = checkpoint(self._mlp, x, use_reentrant=False)
        else:
            x = self._mlp(x)
        logits = self.head(self.dropout(x))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits.float(), labels)
        return out


def make_token_data(n: int, seed: int, min_len: int = 2, max_len: int = 12) -> list[dict]:
    """Variable-length examples; label c draws its tokens mostly from its own id range."""
    g = torch.Generator().manual_seed(seed)
    span = (VOCAB - 1) // NUM_LABELS
    data = []
    for _ in range(n):
        label = int(torch.randint(NUM_LABELS, (), generator=g))
        length = int(torch.randint(min_len, max_len + 1, (), generator=g))
        ids = 1 + label * span + torch.randint(span, (length,), generator=g)
        noise = torch.rand(length, generator=g) < 0.2
        ids = torch.where(noise, torch.randint(1, VOCAB, (length,), generator=g), ids)
        data.append({"input_ids": ids.tolist(), "labels": label})
    return data


class TinyMLP(nn.Module):
    """Fixed-size inputs: Linear -> LayerNorm -> tanh -> Linear, cross-entropy loss."""

    def __init__(self, d_in: int = 6, d_hidden: int = 8, num_labels: int = NUM_LABELS) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, num_labels)

    def forward(self, x: Tensor, labels: Tensor) -> dict[str, Tensor]:
        logits = self.fc2(torch.tanh(self.norm(self.fc1(x))))
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def make_vector_data(n: int, seed: int, d_in: int = 6) -> list[dict]:
    """Fixed-size examples for :class:`TinyMLP`: labels from a random linear rule."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, NUM_LABELS, generator=g)
    labels = (x @ w).argmax(-1)
    return [{"x": x[i], "labels": labels[i]} for i in range(n)]

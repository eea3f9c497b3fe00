"""Masked-language-model pre-training of an encoder (BERT, Devlin et al. 2019).

A share of the tokens of each sequence (15 %) is chosen; of those, 80 % are replaced by
``[MASK]``, 10 % by a random token and 10 % kept, and the model predicts the original
tokens there (:func:`mask_tokens`, applied anew to every batch as in RoBERTa's dynamic
masking). :class:`MaskedLanguageModel` puts BERT's prediction head (dense, GELU, norm,
then a decoder tied to the word embeddings) on top of an
:class:`~headwise.models.encoder.EncoderClassifier`'s encoder and returns the
cross-entropy over the chosen positions only, so logits are computed for ~15 % of the
tokens instead of all.

Pre-training on the task's own unlabelled texts before fine-tuning ("self-pretraining",
Krishna et al. 2023, *Downstream datasets make surprisingly good pretraining corpora*)
gives a from-scratch Transformer the contextual statistics a BiLSTM's recurrence gets for
free; :func:`headwise.intent.training.pretrain.pretrain_encoder` runs it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.nn.norm import build_norm

IGNORE_INDEX = -100


def mask_tokens(input_ids: Tensor, *, mask_id: int, vocab_size: int,
                special_ids: Iterable[int], probability: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """BERT's masking: choose ``probability`` of the ordinary tokens; replace 80 % of the
    chosen by ``mask_id``, 10 % by a random ordinary token, keep 10 %.

    Args:
        input_ids: (batch, seq) token ids (padding and other special tokens included).
        mask_id: the ``[MASK]`` token's id.
        vocab_size: ids are drawn from ``[0, vocab_size)`` for the random replacements
            (special ids excluded).
        special_ids: ids never chosen (padding, ``[CLS]``, ``[SEP]``, ...).
        probability: the share of ordinary tokens to predict, in (0, 1).
        generator: random source (for reproducible masks).

    Returns:
        ``(inputs, labels)``: the corrupted ids, and the original id at every chosen
        position with :data:`IGNORE_INDEX` elsewhere. Every sequence with an ordinary token
        gets at least one chosen position.

    Raises:
        ValueError: a probability outside (0, 1), or a vocabulary with no ordinary id.
    """
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {probability}")
    special = torch.tensor(sorted(set(special_ids) | {mask_id}), dtype=torch.long)
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[special[special < vocab_size]] = False
    pool = ordinary.nonzero().flatten()
    if pool.numel() == 0:
        raise ValueError("the vocabulary has no ordinary (non-special) token")
    eligible = ~torch.isin(input_ids, special)
    draw = torch.rand(input_ids.shape, generator=generator)
    chosen = eligible & (draw < probability)
    # a sequence with nothing chosen still teaches something: take its lowest draw
    none = eligible.any(1) & ~chosen.any(1)
    if bool(none.any()):
        lowest = draw.masked_fill(~eligible, 2.0).argmin(1)
        rows = none.nonzero().flatten()
        chosen[rows, lowest[rows]] = True
    labels = input_ids.masked_fill(~chosen, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)
    inputs = input_ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    picks = torch.randint(pool.numel(), (int(swap.sum()),), generator=generator)
    inputs[swap] = pool[picks]
    return inputs, labels


class MaskedLMHead(nn.Module):
    """BERT's prediction head: dense + GELU + norm, then a decoder whose weight is the
    word-embedding matrix (tied) plus a bias per vocabulary entry.

    Args:
        embedding: the encoder's word embeddings (the decoder's weight).
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        norm_eps: the norm's epsilon.
    """

    def __init__(self, embedding: nn.Embedding, norm: str = "layernorm",
                 norm_eps: float = 1e-12) -> None:
        super().__init__()
        vocab, d_model = embedding.weight.shape
        self.dense = nn.Linear(d_model, d_model)
        self.norm = build_norm(norm, d_model, norm_eps)
        self.embedding = embedding
        self.bias = nn.Parameter(torch.zeros(vocab))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        """(..., d_model) -> (..., vocab) logits."""
        h = self.norm(F.gelu(self.dense(hidden)))
        return F.linear(h, self.embedding.weight, self.bias)


class MaskedLanguageModel(nn.Module):
    """An encoder classifier's encoder with a masked-LM head, for the Trainer.

    ``forward(input_ids, attention_mask=None, labels=None)`` returns ``{"logits"}`` of the
    positions whose label is not :data:`IGNORE_INDEX` (all positions without labels), and
    ``"loss"``, their mean cross-entropy, with labels. The classifier's own head is not
    used; after pre-training, ``model`` is fine-tuned as usual.

    Args:
        model: an :class:`~headwise.models.encoder.EncoderClassifier` (anything with an
            ``encode(input_ids, attention_mask)`` method, an ``encoder.embeddings.
            word_embeddings`` table and a ``config`` with ``norm`` / ``norm_eps``).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        config = model.config
        self.head = MaskedLMHead(model.encoder.embeddings.word_embeddings, config.norm,
                                 config.norm_eps)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None) -> dict[str, Tensor]:
        """Masked-position logits (and the loss with ``labels``)."""
        hidden = self.model.encode(input_ids, attention_mask)
        if labels is None:
            return {"logits": self.head(hidden)}
        chosen = labels != IGNORE_INDEX
        logits = self.head(hidden[chosen])
        target = labels[chosen]
        loss = F.cross_entropy(logits.float(), target) if target.numel() else \
            logits.sum() * 0.0
        return {"logits": logits, "loss": loss}

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute the encoder's activations in the backward pass."""
        self.model.set_gradient_checkpointing(enabled)


__all__ = ["IGNORE_INDEX", "MaskedLMHead", "MaskedLanguageModel", "mask_tokens"]

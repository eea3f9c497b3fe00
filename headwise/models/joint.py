"""Joint intent classification and slot filling on one encoder.

Compound customer questions carry several intents at once and the numbers that matter
("I was charged twice for a transfer of £50, refund it"). :class:`JointIntentSlotModel`
reads them with one Transformer encoder and two heads, as in joint BERT (Chen et al.,
"BERT for Joint Intent Classification and Slot Filling", 2019) and Rasa's DIET (Bunk et
al., 2020):

* an **intent head** over the pooled sequence: one sigmoid per intent when
  ``config.multi_label`` (binary cross-entropy summed over intents, averaged over the
  batch; every intent whose probability passes a threshold is predicted), else a softmax
  over intents (cross-entropy);
* a **slot tagger** over every token: BIO tags (``config.slot_tags``, e.g. ``O``,
  ``B-amount``, ``I-amount``), cross-entropy that ignores ``-100`` and padding, summed
  over an example's tokens and averaged over the batch (each loss is then the negative
  log-likelihood of one example's labels; a per-token mean next to a per-example sum of
  48 intents let the intents drown the tags).

The loss is ``intent loss + slot_loss_weight * tag loss``. With ``config.number_heads``
the encoder's chosen heads also get the learned number-key bias
(:class:`~headwise.attention.number_bias.NumberKeyBias`).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from headwise.models.config import ModelConfig
from headwise.models.encoder import EncoderClassifier
from headwise.models.registry import register_model

__all__ = ["JointIntentSlotModel"]

IGNORE_INDEX = -100


class JointIntentSlotModel(EncoderClassifier):
    """An encoder with an intent head (multi- or single-label) and a BIO slot tagger.

    ``forward(input_ids, attention_mask=None, token_type_ids=None, labels=None,
    tag_labels=None)`` returns ``{"logits": (batch, intents), "tag_logits": (batch, seq,
    tags)}`` plus ``"loss"`` (and ``"intent_loss"``/``"tag_loss"``) when targets are
    given: the contract the Trainer trains.

    Raises:
        ValueError: ``model_type`` is not ``joint_intent_slot``, or ``slot_tags`` is
            given without an ``O`` tag first.
    """

    def __init__(self, config: ModelConfig) -> None:
        if config.model_type != "joint_intent_slot":
            raise ValueError(f"model_type must be 'joint_intent_slot', got {config.model_type!r}")
        if config.slot_tags is not None and (not config.slot_tags or config.slot_tags[0] != "O"):
            raise ValueError("slot_tags must start with the outside tag 'O'")
        super().__init__(config)
        self.tagger: nn.Linear | None = None
        if config.slot_tags:
            self.tagger = nn.Linear(config.d_model, len(config.slot_tags))
            nn.init.normal_(self.tagger.weight, std=0.02)
            nn.init.zeros_(self.tagger.bias)

    @property
    def multi_label(self) -> bool:
        """Whether the intent head is one sigmoid per intent."""
        return bool(self.config.multi_label)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                tag_labels: Tensor | None = None) -> dict[str, Tensor]:
        """Intent logits, tag logits, and the losses of the targets given.

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), True/1 for real tokens.
            token_type_ids: segment ids (BERT), default zeros.
            labels: multi-label: (batch, intents) 0/1 targets; else (batch,) class ids.
            tag_labels: (batch, seq) BIO tag ids, ``-100`` where not scored (special
                tokens); padding positions are never scored.

        Raises:
            ValueError: ``tag_labels`` for a model without a slot tagger, or targets of
                the wrong shape.
        """
        hidden = self.encode(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(self.pool(hidden, attention_mask)))
        out: dict[str, Tensor] = {"logits": logits}
        if self.tagger is not None:
            out["tag_logits"] = self.tagger(self.dropout(hidden))
        losses = []
        if labels is not None:
            out["intent_loss"] = self._intent_loss(logits, labels)
            losses.append(out["intent_loss"])
        if tag_labels is not None:
            if self.tagger is None:
                raise ValueError("this model has no slot tagger (config.slot_tags is None)")
            if tag_labels.shape != input_ids.shape:
                raise ValueError(f"tag_labels must be {tuple(input_ids.shape)}, got "
                                 f"{tuple(tag_labels.shape)}")
            if attention_mask is not None:
                tag_labels = tag_labels.masked_fill(~attention_mask.bool(), IGNORE_INDEX)
            tag_logits = out["tag_logits"]
            if bool((tag_labels != IGNORE_INDEX).any()):
                # summed over the tokens of an example, averaged over the batch: the same
                # per-example log-likelihood scale as the multi-label intent loss
                out["tag_loss"] = F.cross_entropy(
                    tag_logits.flatten(0, 1).float(), tag_labels.flatten(),
                    ignore_index=IGNORE_INDEX, reduction="sum") / tag_logits.shape[0]
            else:  # nothing to score: a zero that still reaches the tagger's parameters
                out["tag_loss"] = tag_logits.float().sum() * 0.0
            losses.append(self.config.slot_loss_weight * out["tag_loss"])
        if losses:
            out["loss"] = sum(losses[1:], losses[0])
        return out

    def _intent_loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        if self.multi_label:
            if labels.shape != logits.shape:
                raise ValueError(f"multi-label targets must be {tuple(logits.shape)}, got "
                                 f"{tuple(labels.shape)}")
            # summed over intents, averaged over the batch: a mean over intents too would
            # shrink the intent loss by the number of intents (48 on NLU++) next to the
            # tag loss, and the shared encoder would learn almost only from the tags
            return F.binary_cross_entropy_with_logits(
                logits.float(), labels.float(), reduction="sum") / logits.shape[0]
        if labels.ndim != 1:
            raise ValueError(f"single-label targets must be (batch,), got {tuple(labels.shape)}")
        return F.cross_entropy(logits.float(), labels)


register_model("joint_intent_slot", JointIntentSlotModel)

"""The intent head and slot tagger of a joint intent + slot model, whatever encoder reads
the text.

A joint model (joint BERT, Chen et al. 2019; Rasa's DIET, Bunk et al. 2020) reads a text
once and answers two questions from it: which intents it expresses, from one pooled
vector, and which tokens are slot values, from every token's state. :class:`JointHeads`
holds both heads and their losses, so the Transformer joint model
(:class:`~headwise.models.joint.JointIntentSlotModel`) and the BiLSTM one
(:class:`~headwise.models.lstm_joint.BiLSTMJointModel`) differ only in their encoder:

* an **intent head** (``classifier``) over the pooled vector: one sigmoid per intent when
  ``config.multi_label`` (binary cross-entropy summed over intents, averaged over the
  batch; every intent whose probability passes a threshold is predicted), else a softmax
  over intents (cross-entropy);
* a **slot tagger** (``tagger``) over every token: BIO tags (``config.slot_tags``, e.g.
  ``O``, ``B-amount``, ``I-amount``), cross-entropy that ignores ``-100`` and padding,
  summed over an example's tokens and averaged over the batch (each loss is then the
  negative log-likelihood of one example's labels; a per-token mean next to a per-example
  sum of 48 intents let the intents drown the tags).

The loss is ``intent loss + slot_loss_weight * tag loss``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from headwise.models.config import ModelConfig

__all__ = ["JointHeads", "check_slot_tags"]

IGNORE_INDEX = -100


def check_slot_tags(config: ModelConfig) -> None:
    """Refuse slot tags without the outside tag ``O`` first.

    Raises:
        ValueError: ``slot_tags`` given but empty or not starting with ``O``.
    """
    if config.slot_tags is not None and (not config.slot_tags or config.slot_tags[0] != "O"):
        raise ValueError("slot_tags must start with the outside tag 'O'")


class JointHeads(nn.Module):
    """The heads of a joint model: a model class derives from it and from its encoder's
    classifier, which provides ``config`` (a :class:`~headwise.models.config.ModelConfig`),
    ``classifier`` (the intent head) and ``dropout``; :meth:`add_tagger` adds the slot
    tagger and :meth:`heads` computes the outputs and losses from the encoder's states.
    """

    config: ModelConfig
    classifier: nn.Linear
    dropout: nn.Module
    tagger: nn.Linear | None

    @property
    def multi_label(self) -> bool:
        """Whether the intent head is one sigmoid per intent."""
        return bool(self.config.multi_label)

    def add_tagger(self, width: int) -> None:
        """Add the slot tagger over token states of size ``width`` (none without
        ``config.slot_tags``), initialised as BERT initialises its heads."""
        self.tagger = None
        if self.config.slot_tags:
            self.tagger = nn.Linear(width, len(self.config.slot_tags))
            nn.init.normal_(self.tagger.weight, std=0.02)
            nn.init.zeros_(self.tagger.bias)

    def heads(self, hidden: Tensor, pooled: Tensor, attention_mask: Tensor | None,
              labels: Tensor | None, tag_labels: Tensor | None) -> dict[str, Tensor]:
        """Intent logits, tag logits, and the losses of the targets given.

        Args:
            hidden: (batch, seq, width) token states.
            pooled: (batch, width) the vector the intent head reads.
            attention_mask: (batch, seq), True/1 for real tokens (None: every token).
            labels: multi-label: (batch, intents) 0/1 targets; else (batch,) class ids.
            tag_labels: (batch, seq) BIO tag ids, ``-100`` where not scored (special
                tokens); padding positions are never scored.

        Returns:
            ``{"logits", "tag_logits"}`` (the latter with a tagger), plus ``"loss"`` and
            ``"intent_loss"``/``"tag_loss"`` for the targets given.

        Raises:
            ValueError: ``tag_labels`` for a model without a slot tagger, or targets of
                the wrong shape.
        """
        logits = self.classifier(self.dropout(pooled))
        out: dict[str, Tensor] = {"logits": logits}
        if self.tagger is not None:
            out["tag_logits"] = self.tagger(self.dropout(hidden))
        losses = []
        if labels is not None:
            out["intent_loss"] = self.intent_loss(logits, labels)
            losses.append(out["intent_loss"])
        if tag_labels is not None:
            if self.tagger is None:
                raise ValueError("this model has no slot tagger (config.slot_tags is None)")
            if tag_labels.shape != hidden.shape[:2]:
                raise ValueError(f"tag_labels must be {tuple(hidden.shape[:2])}, got "
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

    def intent_loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """The intent head's loss: multi-label, binary cross-entropy summed over intents and
        averaged over the batch; single-label, the mean cross-entropy.

        Raises:
            ValueError: targets of the wrong shape for the head.
        """
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

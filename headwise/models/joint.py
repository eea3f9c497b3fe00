"""Joint intent classification and slot filling on one Transformer encoder.

Compound customer questions carry several intents at once and the numbers that matter
("I was charged twice for a transfer of £50, refund it"). :class:`JointIntentSlotModel`
reads them with one Transformer encoder and the joint heads of
:class:`~headwise.models.joint_heads.JointHeads` (an intent head over the pooled
sequence, multi- or single-label, and a BIO slot tagger over every token), as in joint
BERT (Chen et al., "BERT for Joint Intent Classification and Slot Filling", 2019) and
Rasa's DIET (Bunk et al., 2020). The BiLSTM baseline with the same heads is
:class:`~headwise.models.lstm_joint.BiLSTMJointModel`.

With ``config.number_heads`` the encoder's chosen heads also get the learned number-key
bias (:class:`~headwise.attention.number_bias.NumberKeyBias`).
"""

from __future__ import annotations

from torch import Tensor

from headwise.models.config import ModelConfig
from headwise.models.encoder import EncoderClassifier
from headwise.models.joint_heads import JointHeads, check_slot_tags
from headwise.models.registry import register_model

__all__ = ["JointIntentSlotModel"]


class JointIntentSlotModel(JointHeads, EncoderClassifier):
    """A Transformer encoder with an intent head (multi- or single-label) and a BIO slot
    tagger.

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
        check_slot_tags(config)
        super().__init__(config)
        self.add_tagger(config.d_model)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                tag_labels: Tensor | None = None) -> dict[str, Tensor]:
        """Intent logits, tag logits, and the losses of the targets given
        (:meth:`~headwise.models.joint_heads.JointHeads.heads`).

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
        return self.heads(hidden, self.pool(hidden, attention_mask), attention_mask, labels,
                          tag_labels)


register_model("joint_intent_slot", JointIntentSlotModel)

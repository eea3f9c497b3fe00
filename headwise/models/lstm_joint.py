"""Joint intent classification and slot filling on a BiLSTM: the recurrent baseline of
the compound task.

The case study headwise reproduces measured a BiLSTM on compound customer questions
before an 8-head Transformer replaced it. :class:`BiLSTMJointModel` is that baseline with
the Transformer joint model's heads and losses
(:class:`~headwise.models.joint_heads.JointHeads`): the BiLSTM of
:class:`~headwise.models.lstm.BiLSTMClassifier` (packed, so padding never reaches it)
reads the text, its pooled vector (``lstm_pooling``) feeds the intent head and its
per-token states (forward and backward concatenated) feed the BIO slot tagger. It is
trained, saved, loaded and served as the Transformer joint model is (``headwise train
--model bilstm --multi-label``).
"""

from __future__ import annotations

from torch import Tensor

from headwise.models.config import ModelConfig
from headwise.models.joint_heads import JointHeads, check_slot_tags
from headwise.models.lstm import BiLSTMClassifier
from headwise.models.registry import register_model

__all__ = ["BiLSTMJointModel"]


class BiLSTMJointModel(JointHeads, BiLSTMClassifier):
    """A BiLSTM with an intent head (multi- or single-label) and a BIO slot tagger.

    Args:
        config: a :class:`~headwise.models.config.ModelConfig` with
            ``model_type="bilstm_joint"``: the BiLSTM's ``vocab_size``, ``lstm_*``
            fields, ``dropout`` and ``pad_token_id``; the heads' ``num_labels``,
            ``multi_label``, ``slot_tags`` and ``slot_loss_weight``.

    ``forward(input_ids, attention_mask=None, token_type_ids=None, labels=None,
    tag_labels=None)`` returns what
    :class:`~headwise.models.joint.JointIntentSlotModel`'s does.

    Raises:
        ValueError: ``model_type`` is not ``bilstm_joint``, ``slot_tags`` without an
            ``O`` tag first, number or negation heads (attention heads: a BiLSTM has
            none), or invalid BiLSTM sizes.
    """

    model_type = "bilstm_joint"

    def __init__(self, config: ModelConfig) -> None:
        if config.model_type != self.model_type:
            raise ValueError(f"model_type must be {self.model_type!r}, got {config.model_type!r}")
        check_slot_tags(config)
        if config.number_heads or config.negation_heads:
            raise ValueError("number_heads and negation_heads bias attention heads; a BiLSTM "
                             "has none")
        super().__init__(config.vocab_size, config.num_labels, embed_dim=config.lstm_embed_dim,
                         hidden_size=config.lstm_hidden, num_layers=config.lstm_layers,
                         pooling=config.lstm_pooling, dropout=config.dropout,
                         pad_token_id=config.pad_token_id)
        self.config = config  # the ModelConfig itself: what save_pretrained writes
        self.add_tagger(2 * config.lstm_hidden)

    @classmethod
    def from_config(cls, config: ModelConfig) -> BiLSTMJointModel:  # type: ignore[override]
        """A freshly initialised model of ``config`` (what ``build_model`` calls)."""
        return cls(config)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, labels: Tensor | None = None,
                tag_labels: Tensor | None = None) -> dict[str, Tensor]:  # type: ignore[override]
        """Intent logits, tag logits, and the losses of the targets given
        (:meth:`~headwise.models.joint_heads.JointHeads.heads`).

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), 1/True = real token; default
                ``input_ids != pad_token_id``.
            token_type_ids: accepted for call compatibility with the Transformer joint
                model and ignored (a BiLSTM has no segment embeddings).
            labels: multi-label: (batch, intents) 0/1 targets; else (batch,) class ids.
            tag_labels: (batch, seq) BIO tag ids, ``-100`` where not scored (special
                tokens); padding positions are never scored.

        Raises:
            ValueError: bad shapes, out-of-range ids, a row without real tokens, or
                targets of the wrong shape.
        """
        states, final, mask = self._run(input_ids, attention_mask)
        pooled = self._pool(states, final, mask)[0]
        return self.heads(states, pooled, mask, labels, tag_labels)


register_model("bilstm_joint", BiLSTMJointModel)

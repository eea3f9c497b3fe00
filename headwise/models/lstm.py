"""BiLSTM classifier: the recurrent baseline for the Transformer classifier.

``BiLSTMClassifier`` is the classic text classifier: token embeddings, a stacked
bidirectional LSTM (Hochreiter & Schmidhuber 1997; Graves & Schmidhuber 2005), a pooling
step that turns the per-token states into one vector, and a linear head. It has the same
calling convention as the Transformer classifier, so the trainer, the metrics and the
service treat both alike::

    out = model(input_ids, attention_mask, labels=labels)
    out["logits"]  # (batch, num_labels)
    out["loss"]    # cross-entropy, only when labels are given

Pooling (``pooling=``):

* ``"max"``: element-wise maximum over the real tokens (Collobert et al. 2011).
* ``"attention"``: additive attention pooling (Bahdanau et al. 2015; Yang et al. 2016):
  ``score_t = v^T tanh(W h_t + b)``, a softmax over the real tokens, and the weighted sum
  of the states. ``forward(..., return_attention=True)`` also returns the weights.
* ``"last"``: the final forward state concatenated with the backward state at the first
  token (the two states that have read the whole sentence).

Padding never reaches the LSTM: the real tokens of each row are packed with
:func:`torch.nn.utils.rnn.pack_padded_sequence`, so logits do not depend on how much
padding a batch carries. The mask may be right-padded, left-padded, or have holes: masked
positions are skipped and the remaining tokens are read in order.

The layers are separate single-layer bidirectional LSTMs with dropout between them
(what ``nn.LSTM(num_layers=n, dropout=p)`` computes), so gradient checkpointing can
recompute one layer at a time.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from torch.utils.checkpoint import checkpoint

from headwise.models.config import ModelConfig
from headwise.models.hub import PretrainedMixin
from headwise.models.registry import register_model
from headwise.nn import Dropout

POOLINGS = ("max", "attention", "last")


class BiLSTMClassifier(PretrainedMixin, nn.Module):
    """Embeddings, a bidirectional LSTM, pooling and a linear classification head.

    Args:
        vocab_size: number of token ids.
        num_labels: number of classes.
        embed_dim: embedding size.
        hidden_size: LSTM state size per direction (token states are ``2 * hidden_size``).
        num_layers: stacked bidirectional layers.
        pooling: ``"max"``, ``"attention"`` or ``"last"`` (see the module docstring).
        dropout: dropout on the embeddings, between LSTM layers and before the head.
        pad_token_id: id of the padding token; the default mask is
            ``input_ids != pad_token_id`` and its embedding row stays zero.

    Raises:
        ValueError: non-positive sizes, an unknown pooling, dropout outside [0, 1), or a
            pad id outside the vocabulary.
    """

    model_type = "bilstm"

    def __init__(self, vocab_size: int, num_labels: int, *, embed_dim: int = 128,
                 hidden_size: int = 128, num_layers: int = 1, pooling: str = "max",
                 dropout: float = 0.1, pad_token_id: int = 0) -> None:
        super().__init__()
        sizes = {"vocab_size": vocab_size, "num_labels": num_labels, "embed_dim": embed_dim,
                 "hidden_size": hidden_size, "num_layers": num_layers}
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) \
                or not 0 <= pad_token_id < vocab_size:
            raise ValueError(f"pad_token_id must be an id in [0, {vocab_size}), "
                             f"got {pad_token_id!r}")
        self.config: dict[str, Any] = {
            **sizes, "pooling": pooling, "dropout": float(dropout), "pad_token_id": pad_token_id,
        }
        self.num_labels, self.hidden_size, self.pooling = num_labels, hidden_size, pooling
        self.pad_token_id = pad_token_id
        self.gradient_checkpointing = False
        width = 2 * hidden_size
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_token_id)
        self.layers = nn.ModuleList(
            nn.LSTM(embed_dim if i == 0 else width, hidden_size, batch_first=True,
                    bidirectional=True)
            for i in range(num_layers))
        self.dropout = Dropout(dropout)
        if pooling == "attention":
            self.pool_proj: nn.Linear | None = nn.Linear(width, width)  # W, b
            self.pool_score: nn.Linear | None = nn.Linear(width, 1, bias=False)  # v
        else:
            self.pool_proj = self.pool_score = None
        self.classifier = nn.Linear(width, num_labels)

    @classmethod
    def from_config(cls, config: dict[str, Any] | ModelConfig) -> BiLSTMClassifier:
        """Build a freshly initialised model from a config.

        Args:
            config: either :attr:`config` (the constructor arguments, e.g. after a JSON
                round trip; a ``"model_type"`` key, if present, must be ``"bilstm"``), or a
                :class:`~headwise.models.config.ModelConfig` with ``model_type="bilstm"``
                (its ``lstm_*`` fields, ``vocab_size``, ``num_labels``, ``dropout`` and
                ``pad_token_id``), as an object or as its ``to_dict()``.

        Returns:
            A new model (load a state dict into it to restore weights).

        Raises:
            ValueError: unknown or missing keys, a different ``model_type``, or invalid
                values.
        """
        if isinstance(config, dict) and "lstm_hidden" in config:
            config = ModelConfig.from_dict(config)
        if isinstance(config, ModelConfig):
            if config.model_type != cls.model_type:
                raise ValueError(f"config is for model_type {config.model_type!r}, "
                                 f"not {cls.model_type!r}")
            return cls(config.vocab_size, config.num_labels, embed_dim=config.lstm_embed_dim,
                       hidden_size=config.lstm_hidden, num_layers=config.lstm_layers,
                       pooling=config.lstm_pooling, dropout=config.dropout,
                       pad_token_id=config.pad_token_id)
        config = dict(config)
        model_type = config.pop("model_type", cls.model_type)
        if model_type != cls.model_type:
            raise ValueError(f"config is for model_type {model_type!r}, not {cls.model_type!r}")
        known = {"vocab_size", "num_labels", "embed_dim", "hidden_size", "num_layers",
                 "pooling", "dropout", "pad_token_id"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown BiLSTMClassifier config keys: {unknown}")
        missing = sorted({"vocab_size", "num_labels"} - set(config))
        if missing:
            raise ValueError(f"BiLSTMClassifier config lacks required keys: {missing}")
        vocab_size, num_labels = config.pop("vocab_size"), config.pop("num_labels")
        return cls(vocab_size, num_labels, **config)

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute each LSTM layer in the backward pass instead of storing its activations.

        While training with gradients enabled, each layer's forward runs under
        :func:`torch.utils.checkpoint.checkpoint`: only the layer inputs are kept, and
        the gate activations are recomputed during backward (one extra LSTM forward per
        layer). Results and gradients are unchanged; dropout sits between the layers,
        outside the recomputed part.

        Args:
            enabled: turn checkpointing on or off.
        """
        self.gradient_checkpointing = bool(enabled)

    # ------------------------------------------------------------------------------
    def _mask(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (batch, seq), got {tuple(input_ids.shape)}")
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be integer token ids, got {input_ids.dtype}")
        if attention_mask is None:
            mask = input_ids != self.pad_token_id
        else:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must have the shape of input_ids "
                                 f"{tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}")
            mask = attention_mask.to(device=input_ids.device, dtype=torch.bool)
        return mask

    def _run(self, input_ids: Tensor, attention_mask: Tensor | None
             ) -> tuple[Tensor, Tensor, Tensor]:
        """Token states (zeros at padding), last-layer final states and the boolean mask."""
        mask = self._mask(input_ids, attention_mask)
        bsz, seq = input_ids.shape
        if bsz == 0:
            raise ValueError("empty batch: input_ids has no rows")
        lengths = mask.sum(dim=1).cpu()
        if bool((lengths == 0).any()):
            rows = (lengths == 0).nonzero().flatten().tolist()
            raise ValueError(f"rows {rows} of the batch have no real tokens (all padding); "
                             f"drop empty texts before batching")
        ids = input_ids.masked_fill(~mask, self.pad_token_id)
        low, high = torch.stack([ids.min(), ids.max()]).tolist()  # one device sync
        if low < 0 or high >= self.embedding.num_embeddings:
            raise ValueError(f"token ids must be in [0, {self.embedding.num_embeddings}), got "
                             f"values in [{low}, {high}]")
        # Move each row's real tokens to the front, keeping their order (a stable sort on
        # "is padding"), so left padding and holes pack like right padding.
        order = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices
        x = self.dropout(self.embedding(ids.gather(1, order)))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        data, layout = packed.data, packed[1:]  # layout: batch_sizes, sorted/unsorted indices
        final = None
        for i, layer in enumerate(self.layers):
            if i > 0:
                data = self.dropout(data)
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                data, final = checkpoint(_lstm_layer, layer, data, *layout, use_reentrant=False)
            else:
                data, final = _lstm_layer(layer, data, *layout)
        front, _ = pad_packed_sequence(PackedSequence(data, *layout), batch_first=True,
                                       total_length=seq)
        index = order.unsqueeze(-1).expand(-1, -1, front.shape[-1])
        states = torch.zeros_like(front).scatter(1, index, front)  # back to original slots
        return states, torch.cat([final[0], final[1]], dim=-1), mask

    def _pool(self, states: Tensor, final: Tensor, mask: Tensor) -> tuple[Tensor, Tensor | None]:
        if self.pooling == "max":
            return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1), None
        if self.pooling == "last":
            return final, None
        scores = self.pool_score(torch.tanh(self.pool_proj(states))).squeeze(-1)
        scores = scores.masked_fill(~mask, float("-inf"))
        low = scores.dtype in (torch.float16, torch.bfloat16)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32 if low else None)
        weights = weights.to(states.dtype)
        return torch.einsum("bs,bsd->bd", weights, states), weights

    # ------------------------------------------------------------------------------
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Per-token states of the last LSTM layer.

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), 1/True = real token; default
                ``input_ids != pad_token_id``.

        Returns:
            (batch, seq, 2 * hidden_size): forward and backward states concatenated,
            zeros at masked positions.

        Raises:
            ValueError: bad shapes, out-of-range ids, or a row without real tokens.
        """
        return self._run(input_ids, attention_mask)[0]

    def pooled(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The sentence vector that the classification head reads.

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), 1/True = real token; default
                ``input_ids != pad_token_id``.

        Returns:
            (batch, 2 * hidden_size), before the head's dropout.

        Raises:
            ValueError: bad shapes, out-of-range ids, or a row without real tokens.
        """
        return self._pool(*self._run(input_ids, attention_mask))[0]

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                labels: Tensor | None = None, *, token_type_ids: Tensor | None = None,
                return_attention: bool = False) -> dict[str, Tensor]:
        """Classify each row of a batch.

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), 1/True = real token; default
                ``input_ids != pad_token_id``.
            labels: (batch,) class ids; adds ``"loss"`` (mean cross-entropy, rows labelled
                -100 ignored).
            token_type_ids: accepted for call compatibility with the Transformer classifier
                (``model(**batch)``) and ignored: the BiLSTM has no segment embeddings.
            return_attention: add ``"pool_weights"`` (batch, seq): the attention-pooling
                weights, summing to 1 over the real tokens and 0 at padding.

        Returns:
            ``{"logits": (batch, num_labels)}``, plus ``"loss"`` and ``"pool_weights"``
            when asked for.

        Raises:
            ValueError: bad shapes, out-of-range ids, a row without real tokens, labels of
                the wrong shape, or ``return_attention`` without attention pooling.
        """
        if return_attention and self.pooling != "attention":
            raise ValueError(f"return_attention needs pooling='attention', this model pools "
                             f"with {self.pooling!r}")
        pooled, weights = self._pool(*self._run(input_ids, attention_mask))
        out = {"logits": self.classifier(self.dropout(pooled))}
        if labels is not None:
            if labels.shape != input_ids.shape[:1]:
                raise ValueError(f"labels must be (batch,) = ({input_ids.shape[0]},), got "
                                 f"{tuple(labels.shape)}")
            out["loss"] = F.cross_entropy(out["logits"], labels.to(out["logits"].device))
        if return_attention:
            out["pool_weights"] = weights
        return out


register_model("bilstm", BiLSTMClassifier.from_config)


def _lstm_layer(layer: nn.LSTM, data: Tensor, batch_sizes: Tensor, sorted_indices: Tensor | None,
                unsorted_indices: Tensor | None) -> tuple[Tensor, Tensor]:
    """One bidirectional layer on packed data (plain tensors, so checkpoint can hold them).

    Returns:
        The packed output data and the final states (2, batch, hidden) in batch order.
    """
    packed = PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)
    out, (h_n, _) = layer(packed)
    return out.data, h_n

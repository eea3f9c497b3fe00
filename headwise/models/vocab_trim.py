"""Vocabulary trimming: keep only the token-embedding rows that a task uses.

A multilingual encoder spends most of its weights on its vocabulary: multilingual-e5-small
has 250,037 token rows of 384 (96 M of its 118 M parameters), while a Chinese intent data
set uses a few thousand of them. Fine-tuning updates (and AdamW keeps two moments for)
every row, and the exported model carries them all. :func:`trim_vocabulary` keeps the rows
of the ids it is given (the task's tokens plus a reserve) and maps every other id to the
unknown token's row, so that::

    trimmed = trim_vocabulary(model, keep_ids, unk_id=tokenizer.unk_token_id)
    trimmed.encode(ids, mask) == model.encode(ids, mask)   # for ids among keep_ids

The tokenizer is untouched: ids outside the model stay the checkpoint's own, and the
model's ``token_rows`` buffer (``vocab_size`` long integers) maps them to rows, in
PyTorch and in the exported ONNX graph alike. Trimming is the technique of Abdaoui et al.
(2020), "Load What You Need: Smaller Versions of Multilingual BERT".
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from headwise.models.config import ModelConfig
from headwise.models.registry import build_model

__all__ = ["trim_vocabulary"]


def trim_vocabulary(model: nn.Module, keep_ids: Iterable[int], *, unk_id: int | None,
                    ) -> nn.Module:
    """A copy of an encoder model whose token table holds only the rows of ``keep_ids``.

    Args:
        model: a headwise encoder model (``EncoderClassifier`` or the joint model) with a
            :class:`ModelConfig`; an already trimmed model is trimmed further.
        keep_ids: token ids (of the model's full vocabulary) to keep; the padding and
            unknown ids are always kept.
        unk_id: the id every dropped id becomes (its row's vector); None keeps the padding
            row for them.

    Returns:
        A new model in the same mode, on the same device and dtype: equal outputs for every
        input made of kept ids, the unknown token's for a dropped id. Its config has
        ``kept_vocab_size`` set, so it saves and loads like any headwise model.

    Raises:
        TypeError: the model has no ModelConfig or no token embeddings.
        ValueError: an id out of the vocabulary's range.
    """
    config = getattr(model, "config", None)
    encoder = getattr(model, "encoder", None)
    if not isinstance(config, ModelConfig) or encoder is None \
            or not hasattr(encoder, "embeddings"):
        raise TypeError(f"{type(model).__name__} is not a headwise encoder model")
    emb = encoder.embeddings
    vocab = config.vocab_size
    keep = {int(i) for i in keep_ids} | {config.pad_token_id}
    if unk_id is not None:
        keep.add(int(unk_id))
    bad = sorted(i for i in keep if not 0 <= i < vocab)
    if bad:
        raise ValueError(f"ids {bad[:10]} are outside the vocabulary of {vocab}")
    kept = torch.tensor(sorted(keep), dtype=torch.long)
    old_rows = torch.arange(vocab) if emb.token_rows is None else emb.token_rows.cpu()
    fallback = config.pad_token_id if unk_id is None else int(unk_id)
    position = torch.full((vocab,), -1, dtype=torch.long)
    position[kept] = torch.arange(len(kept))
    token_rows = torch.where(position >= 0, position, position[fallback])
    trimmed = build_model(config.replace(kept_vocab_size=len(kept)))
    weight = emb.word_embeddings.weight.detach().cpu()
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()
             if not k.startswith("encoder.embeddings.word_embeddings.")
             and k != "encoder.embeddings.token_rows"}
    state["encoder.embeddings.word_embeddings.weight"] = weight[old_rows[kept]].clone()
    state["encoder.embeddings.token_rows"] = token_rows
    trimmed.load_state_dict(state, strict=True)
    param = next(model.parameters())
    trimmed = trimmed.to(device=param.device, dtype=param.dtype)
    trimmed.train(model.training)
    return trimmed

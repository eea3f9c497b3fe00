"""Self-pretraining: a masked-LM stage on the training texts before fine-tuning.

A small Transformer trained from scratch on a few thousand labelled queries sees each
word in few contexts; a BiLSTM's recurrence makes up for that, attention does not. A few
epochs of masked-language modelling (:mod:`headwise.models.mlm`) on the same texts, with
no labels, first teach the encoder which words go together; the classifier is then
fine-tuned from those weights (Krishna et al. 2023: pre-training on the downstream
dataset alone recovers much of the gain of a large external corpus). Only the training
texts are used: the validation and test texts stay unseen.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from headwise.models.mlm import MaskedLanguageModel, mask_tokens
from headwise.text.batching import pad_collate
from headwise.text.tokenizer import Tokenizer
from headwise.train import TrainConfig, Trainer


@dataclass
class PretrainResult:
    """What the masked-LM stage did.

    Attributes:
        epochs: passes over the texts.
        steps: optimizer steps.
        first_loss: mean masked-LM loss over the first 10 % of steps (or the first step).
        last_loss: mean masked-LM loss over the last 10 % of steps.
        seconds: wall time.
    """

    epochs: float
    steps: int
    first_loss: float
    last_loss: float
    seconds: float


class _MaskingCollate:
    """Pad a batch, then mask it anew (dynamic masking) from a seeded generator."""

    def __init__(self, tokenizer: Tokenizer, probability: float, seed: int) -> None:
        mask_id = tokenizer.mask_token_id
        if mask_id is None:
            raise ValueError("the tokenizer has no [MASK] token; masked-LM pre-training needs "
                             "one")
        self.pad_id = tokenizer.pad_token_id
        self.mask_id = mask_id
        self.vocab_size = tokenizer.vocab_size
        self.special = [i for i in (tokenizer.token_to_id(t) for t in
                                    tokenizer.special_tokens.values()) if i is not None]
        self.probability = probability
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Tensor]:
        batch = pad_collate(examples, pad_id=self.pad_id)
        inputs, labels = mask_tokens(batch["input_ids"], mask_id=self.mask_id,
                                     vocab_size=self.vocab_size, special_ids=self.special,
                                     probability=self.probability, generator=self.generator)
        return {"input_ids": inputs, "attention_mask": batch["attention_mask"],
                "labels": labels}


def pretrain_encoder(model: nn.Module, tokenizer: Tokenizer, token_ids: Sequence[list[int]],
                     config: TrainConfig, *, out_dir: str | Path,
                     probability: float = 0.15) -> PretrainResult:
    """Train ``model``'s encoder as a masked language model on ``token_ids``, in place.

    Args:
        model: an :class:`~headwise.models.encoder.EncoderClassifier` (its classification
            head is left untouched).
        tokenizer: the model's tokenizer (it must have a ``[MASK]`` token).
        token_ids: the texts' ids, special tokens included, unpadded.
        config: the Trainer settings of this stage (no validation is run; ``patience`` and
            evaluation settings are ignored).
        out_dir: scratch directory for the stage's checkpoints (removed afterwards).
        probability: share of tokens to predict.

    Returns:
        The :class:`PretrainResult`.

    Raises:
        ValueError: no texts, or a tokenizer without ``[MASK]``.
    """
    if not token_ids:
        raise ValueError("masked-LM pre-training needs at least one text")
    collate = _MaskingCollate(tokenizer, probability, config.seed)
    rows = [{"input_ids": ids} for ids in token_ids]
    config = replace(config, patience=None, keep_checkpoints=1)
    out_dir = Path(out_dir)
    mlm = MaskedLanguageModel(model)
    trainer = Trainer(mlm, config, rows, collate_fn=collate, out_dir=out_dir)
    start = time.perf_counter()
    try:
        result = trainer.train()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    losses = [float(h["loss"]) for h in result.history if "loss" in h]
    tail = max(1, len(losses) // 10)
    return PretrainResult(epochs=result.epochs, steps=result.steps,
                          first_loss=sum(losses[:tail]) / tail if losses else float("nan"),
                          last_loss=sum(losses[-tail:]) / tail if losses else float("nan"),
                          seconds=time.perf_counter() - start)


__all__ = ["PretrainResult", "pretrain_encoder"]

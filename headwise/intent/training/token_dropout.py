"""Word dropout on the training inputs: each real token is replaced by the unknown token
with probability ``p`` at every training step (Iyyer et al. 2015, "Deep Unordered
Composition Rivals Syntactic Methods for Text Classification"; the "token cutoff" of Shen et
al. 2020), so that no single token of a training phrasing can carry the answer alone and the
network must read the rest of the message. Validation, calibration and prediction see the
text unchanged.

Tokens that decide an intent by themselves are never dropped: the special tokens (padding,
``[CLS]``/``[SEP]``, unknown, mask, the number token), an input prefix (e5's ``"query: "``),
negation cues (:func:`~headwise.text.negation_tokens.negation_token_ids`), clause breaks
(:func:`~headwise.text.negation_tokens.clause_break_token_ids`: where a cue's scope ends
for clause-scoped negation heads) and number pieces
(:func:`~headwise.text.number_tokens.number_token_ids`): a dropped "不" would teach the
network that "我不想开通自动还款" asks to turn autopay on, as the augmentations of
:mod:`~headwise.intent.training.augmentation` also leave them alone. (The multi-label
task's ``task.number_dropout`` is another thing: it replaces whole numbers by the ``[NUM]``
token once per row, so that the placeholder of unseen numbers gets trained.)

``levers.token_dropout`` sets ``p`` (0: off); single-label and multi-label training take it
(:class:`~headwise.intent.training.losses.SmoothedClassification`,
:class:`~headwise.intent.training.losses.CompoundObjective`). Measured on the demo in
BENCHMARKS ``demo:transformer``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from headwise.text.negation_tokens import clause_break_token_ids, negation_token_ids
from headwise.text.number_tokens import number_token_ids
from headwise.text.tokenizer import Tokenizer

__all__ = ["TokenDropout", "token_dropout_for"]


class TokenDropout(nn.Module):
    """Replace each droppable real token by ``replacement_id`` with probability ``p``, in
    training mode only.

    Args:
        p: the drop probability, in [0, 1).
        replacement_id: the id a dropped token becomes (the unknown token's).
        kept: (vocab,) bool, True for the ids never dropped.

    Raises:
        ValueError: ``p`` outside [0, 1), ``kept`` not 1-D, or ``replacement_id`` outside it.
    """

    kept: Tensor

    def __init__(self, p: float, replacement_id: int, kept: Tensor) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"token dropout p must be in [0, 1), got {p}")
        if kept.ndim != 1 or not 0 <= replacement_id < kept.numel():
            raise ValueError(f"kept must be (vocab,) and replacement_id in [0, "
                             f"{kept.numel()}), got {tuple(kept.shape)}, {replacement_id}")
        self.p = float(p)
        self.replacement_id = int(replacement_id)
        self.register_buffer("kept", kept.bool().clone(), persistent=False)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """``input_ids`` with some real tokens replaced (training mode), else unchanged.

        Args:
            input_ids: (batch, seq) token ids.
            attention_mask: (batch, seq), 1/True for real tokens; None: every token is real.
        """
        if not self.training or self.p == 0.0 or input_ids.numel() == 0:
            return input_ids
        drop = torch.rand(input_ids.shape, device=input_ids.device) < self.p
        drop &= ~self.kept[input_ids.clamp(0, self.kept.numel() - 1)]
        if attention_mask is not None:
            drop &= attention_mask.bool()
        return input_ids.masked_fill(drop, self.replacement_id)

    def extra_repr(self) -> str:
        return f"p={self.p}, replacement_id={self.replacement_id}"


def token_dropout_for(tokenizer: Tokenizer, p: float) -> TokenDropout | None:
    """The token dropout of ``levers.token_dropout`` for a tokenizer's ids, or None when
    ``p`` is 0.

    Raises:
        ValueError: ``p`` outside [0, 1), or a tokenizer without an unknown token.
    """
    if p == 0.0:
        return None
    if tokenizer.unk_token_id is None:
        raise ValueError("levers.token_dropout replaces tokens by the unknown token, and "
                         "this tokenizer has none")
    kept = torch.zeros(tokenizer.vocab_size, dtype=torch.bool)
    special = [tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
               tokenizer.unk_token_id, tokenizer.mask_token_id, tokenizer.number_token_id,
               *tokenizer.prefix_ids, *negation_token_ids(tokenizer),
               *clause_break_token_ids(tokenizer), *number_token_ids(tokenizer)]
    ids = torch.tensor([i for i in special if i is not None and 0 <= i < kept.numel()],
                       dtype=torch.long)
    kept[ids] = True
    return TokenDropout(p, tokenizer.unk_token_id, kept)

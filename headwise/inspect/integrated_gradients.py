"""Integrated gradients (Sundararajan et al. 2017) of a network's logits over its token
embeddings, computed by Captum's ``LayerIntegratedGradients``, with the completeness error
of each answer: the attributions should sum to ``logit(x) - logit(baseline)``, and the
number of Gauss-Legendre steps doubles until a finite quadrature misses it by at most
:data:`COMPLETENESS_TOLERANCE` (relative to ``max(1, |logit(x) - logit(baseline)|)``) or
``max_steps`` is reached.

The path runs over the output of the token embedding table (:func:`embedding_layer`:
``word_embeddings`` of a Transformer, ``embedding`` of the BiLSTM). The baseline
(:func:`baseline_ids`) puts the padding token at every position but the special tokens
and the input prefix, which keep theirs, so their attribution is exactly zero. The
baseline logit is the network's output at the start of the integrated path itself (the
baseline embeddings fed through a hook), so completeness holds even where a network reads
the token ids beside the embeddings (the number and negation key biases).
:func:`headwise.inspect.attribution.explain` builds an explanation of one text on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from headwise.text.tokenizer import Tokenizer

__all__ = ["COMPLETENESS_TOLERANCE", "baseline_ids", "embedding_layer", "integrated_gradients",
           "network_logits"]

#: the completeness error an explanation is held to, relative to
#: ``max(1, |logit(x) - logit(baseline)|)``
COMPLETENESS_TOLERANCE = 0.01


def embedding_layer(model: nn.Module) -> nn.Module:
    """The token embedding table whose output integrated gradients integrates over.

    Raises:
        TypeError: a network with neither a Transformer encoder's nor the BiLSTM's table.
    """
    encoder = getattr(model, "encoder", None)
    embeddings = getattr(encoder, "embeddings", None)
    table = getattr(embeddings, "word_embeddings", None)
    if isinstance(table, nn.Embedding):
        return table
    table = getattr(model, "embedding", None)
    if isinstance(table, nn.Embedding):
        return table
    raise TypeError(f"{type(model).__name__} has no token embedding table to attribute to "
                    f"(a Transformer encoder's word_embeddings or the BiLSTM's embedding)")


def network_logits(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
            ) -> torch.Tensor:
    """A network's ``(batch, intents)`` logits for token ids and their attention mask."""
    return model(input_ids=input_ids, attention_mask=attention_mask)["logits"]


def _layer_output(model: nn.Module, layer: nn.Module, ids: torch.Tensor, mask: torch.Tensor
                  ) -> torch.Tensor:
    seen: list[torch.Tensor] = []
    handle = layer.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    try:
        network_logits(model, ids, mask)
    finally:
        handle.remove()
    return seen[0]


def _logits_with(model: nn.Module, layer: nn.Module, ids: torch.Tensor, mask: torch.Tensor,
                 replacement: torch.Tensor) -> torch.Tensor:
    handle = layer.register_forward_hook(lambda _m, _i, _out: replacement)
    try:
        return network_logits(model, ids, mask)
    finally:
        handle.remove()


def integrated_gradients(model: nn.Module, input_ids: torch.Tensor,
                         attention_mask: torch.Tensor, targets: Sequence[int], *,
                         baseline_ids: torch.Tensor, steps: int = 32, max_steps: int = 1024,
                         tolerance: float = COMPLETENESS_TOLERANCE
                         ) -> list[tuple[np.ndarray, float, float, float, int]]:
    """Integrated gradients of one text's logits over its token embeddings (Captum).

    Args:
        model: a classifier network (``model(input_ids=, attention_mask=)["logits"]``), in
            eval mode.
        input_ids, attention_mask: (1, n) the text.
        targets: the logit indices to explain.
        baseline_ids: (1, n) the baseline's token ids (their embeddings start the path).
        steps: Gauss-Legendre steps of the first try.
        max_steps: the most steps; they double while the completeness error is above
            ``tolerance``.
        tolerance: the relative completeness error aimed at.

    Returns:
        Per target ``(scores (n,), logit, baseline_logit, error, steps)``.

    Raises:
        ValueError: not one text, or ``steps < 1``.
    """
    from captum.attr import LayerIntegratedGradients

    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"integrated gradients explains one text: input_ids (1, n), got "
                         f"{tuple(input_ids.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    layer = embedding_layer(model)
    mask = attention_mask.bool()
    with torch.inference_mode(False), torch.no_grad():
        logits = network_logits(model, input_ids, mask)[0].double()
        start = _layer_output(model, layer, baseline_ids, mask)
        base = _logits_with(model, layer, input_ids, mask, start)[0].double()
    lig = LayerIntegratedGradients(lambda ids, m: network_logits(model, ids, m), layer)
    out = []
    for target in targets:
        n = steps
        while True:
            with torch.inference_mode(False):
                attr = lig.attribute(input_ids, baselines=baseline_ids, target=int(target),
                                     additional_forward_args=(mask,), n_steps=n,
                                     method="gausslegendre", internal_batch_size=n)
            scores = attr[0].double().sum(-1).detach().cpu().numpy()
            delta = float(logits[target] - base[target])
            error = float(scores.sum() - delta)
            if abs(error) <= tolerance * max(1.0, abs(delta)) or n >= max_steps:
                break
            n = min(2 * n, max_steps)
        out.append((scores, float(logits[target]), float(base[target]), error, n))
    return out


def baseline_ids(tokenizer: Tokenizer, ids: torch.Tensor) -> torch.Tensor:
    """Integrated gradients' baseline: the window with its text tokens made padding, its
    special tokens and input prefix (:attr:`~headwise.text.tokenizer.Tokenizer.prefix_ids`,
    right after ``cls``) kept."""
    special = {i for i in (tokenizer.cls_token_id, tokenizer.sep_token_id) if i is not None}
    row = [int(i) for i in ids[0].tolist()]
    keep = [i in special for i in row]
    lead = int(bool(row) and row[0] == tokenizer.cls_token_id)
    prefix = tuple(tokenizer.prefix_ids)
    if prefix and tuple(row[lead:lead + len(prefix)]) == prefix:
        keep[lead:lead + len(prefix)] = [True] * len(prefix)
    mask = torch.tensor([keep], device=ids.device)
    return torch.where(mask, ids, torch.full_like(ids, tokenizer.pad_token_id))

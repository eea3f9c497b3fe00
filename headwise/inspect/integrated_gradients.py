"""Integrated gradients (Sundararajan et al. 2017) of a network's logits over its token
embeddings, computed by Captum's ``IntegratedGradients``, with the completeness error of
each answer: the attributions should sum to ``logit(x) - logit(baseline)``.

The straight path from the baseline's embeddings to the text's is integrated by adaptive
quadrature: it starts as one segment with ``steps`` Gauss-Legendre nodes, and while the
completeness error is above :data:`COMPLETENESS_TOLERANCE` (relative to
``max(1, |logit(x) - logit(baseline)|)``) the segment with the largest error of its own
(its attributions' sum against the logit's change between its ends, both known) is
halved, each half with ``steps`` nodes, until the error is within tolerance or the next
halving would pass ``max_steps`` gradient evaluations. The integrand of a Transformer
turns sharply where a softmax flips, on a short stretch of the path: halving that stretch
costs a fraction of doubling the nodes of the whole path, which is what the tail of
explanation latencies paid before (BENCHMARKS ``playground:cpu``).

The path runs over the output of the token embedding table (:func:`embedding_layer`:
``word_embeddings`` of a Transformer, ``embedding`` of the BiLSTM). The baseline
(:func:`baseline_ids`) puts the padding token at every position but the special tokens
and the input prefix, which keep theirs, so their attribution is exactly zero. The
network reads each point of the path through a hook on that table, with the text's token
ids beside it, so completeness holds even where a network reads the ids beside the
embeddings (the number and negation key biases): the baseline logit is the network's
output at the path's start, not at the baseline's ids.
:func:`headwise.inspect.attribution.explain` builds an explanation of one text on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from headwise.text.tokenizer import Tokenizer

__all__ = ["COMPLETENESS_TOLERANCE", "SEGMENT_STEPS", "baseline_ids", "embedding_layer",
           "integrated_gradients", "network_logits"]

#: the completeness error an explanation is held to, relative to
#: ``max(1, |logit(x) - logit(baseline)|)``
COMPLETENESS_TOLERANCE = 0.01
#: Gauss-Legendre nodes per segment of the path, the default of every explanation (chosen
#: on the demo's validation texts: BENCHMARKS ``playground:cpu``)
SEGMENT_STEPS = 4


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
                         baseline_ids: torch.Tensor, steps: int = SEGMENT_STEPS,
                         max_steps: int = 1024, tolerance: float = COMPLETENESS_TOLERANCE
                         ) -> list[tuple[np.ndarray, float, float, float, int]]:
    """Integrated gradients of one text's logits over its token embeddings (Captum), by
    adaptive quadrature over the path (see the module's note).

    Args:
        model: a classifier network (``model(input_ids=, attention_mask=)["logits"]``), in
            eval mode.
        input_ids, attention_mask: (1, n) the text.
        targets: the logit indices to explain.
        baseline_ids: (1, n) the baseline's token ids (their embeddings start the path).
        steps: Gauss-Legendre nodes of each segment (the first try is the whole path
            with this many).
        max_steps: the most gradient evaluations per target; segments are halved while
            the completeness error is above ``tolerance`` and a halving stays within it.
        tolerance: the relative completeness error aimed at.

    Returns:
        Per target ``(scores (n,), logit, baseline_logit, error, gradient evaluations)``.

    Raises:
        ValueError: not one text, or ``steps < 1``.
    """
    from captum.attr import IntegratedGradients

    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"integrated gradients explains one text: input_ids (1, n), got "
                         f"{tuple(input_ids.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    layer = embedding_layer(model)
    mask = attention_mask.bool()

    def along(points: torch.Tensor) -> torch.Tensor:
        """The logits at points of the path ``(k, n, d)``, the text's ids beside them."""
        k = points.shape[0]
        return _logits_with(model, layer, input_ids.expand(k, -1), mask.expand(k, -1), points)

    with torch.inference_mode(False), torch.no_grad():
        end = _layer_output(model, layer, input_ids, mask)
        start = _layer_output(model, layer, baseline_ids, mask)
        ends = along(torch.cat([start, end])).double()
    path = end - start
    ig = IntegratedGradients(along)

    def point(alpha: float) -> torch.Tensor:
        return start + alpha * path

    def segments_of(target: int, cuts: list[tuple[float, float, float, float]]) -> list:
        """``[a, b, logit at a, logit at b, scores, own completeness error]`` of each
        segment ``(a, b, logit at a, logit at b)``, all in one Captum call (one batch)."""
        with torch.inference_mode(False):
            attr = ig.attribute(torch.cat([point(c[1]) for c in cuts]),
                                baselines=torch.cat([point(c[0]) for c in cuts]),
                                target=target, n_steps=steps, method="gausslegendre",
                                internal_batch_size=steps * len(cuts))
        found = []
        for row, (a, b, fa, fb) in zip(attr, cuts, strict=True):
            scores = row.double().sum(-1).detach().cpu().numpy()
            found.append([a, b, fa, fb, scores, float(scores.sum() - (fb - fa))])
        return found

    out = []
    for target in (int(t) for t in targets):
        logit, base = float(ends[1, target]), float(ends[0, target])
        segments = segments_of(target, [(0.0, 1.0, base, logit)])
        evaluations = steps
        delta = logit - base
        while True:
            error = sum(s[5] for s in segments)
            if abs(error) <= tolerance * max(1.0, abs(delta)) or \
                    evaluations + 2 * steps > max_steps:
                break
            worst = max(range(len(segments)), key=lambda i: abs(segments[i][5]))
            a, b, fa, fb, _, _ = segments[worst]
            middle = (a + b) / 2
            with torch.inference_mode(False), torch.no_grad():
                fm = float(along(point(middle))[0, target])
            segments[worst:worst + 1] = segments_of(target, [(a, middle, fa, fm),
                                                             (middle, b, fm, fb)])
            evaluations += 2 * steps
        scores = np.sum([s[4] for s in segments], axis=0)
        out.append((scores, logit, base, float(scores.sum() - delta), evaluations))
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

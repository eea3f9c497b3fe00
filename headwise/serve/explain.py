"""``/v1/explain``: per-head attention and attention rollout for one text.

The classifier is run once on the text (truncated to the maximum length) inside
:func:`~headwise.attention.capture.capture_attention`, which records every layer's
per-head weights; the tokens come with their character offsets so a client can draw the
same head view as the offline report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from headwise.attention.capture import capture_attention
from headwise.inspect.forward import attention_layers
from headwise.inspect.rollout import rollout_matrix
from headwise.intent.classifier import IntentClassifier

__all__ = ["Explanation", "explain_text"]


@dataclass(frozen=True)
class Explanation:
    """What one explained forward pass gives.

    Attributes:
        tokens: ``[(token, start, end, special)]``; special tokens have no span (None).
        attention: (layers, heads, q, k) float32 weights.
        rollout: (q, k) float64 rollout matrix.
        logits: (intents,) float64 logits of the same forward pass.
        truncated: whether the text was cut to the maximum length.
        total_tokens: tokens of the whole text, special tokens included.
    """

    tokens: list[tuple[str, int | None, int | None, bool]]
    attention: torch.Tensor
    rollout: torch.Tensor
    logits: np.ndarray
    truncated: bool
    total_tokens: int


@torch.inference_mode()
def explain_text(classifier: IntentClassifier, text: str) -> Explanation:
    """Per-head attention, rollout and logits of one text.

    Args:
        classifier: a classifier with a Transformer encoder.
        text: the text (truncated to ``classifier.max_length`` tokens).

    Returns:
        An :class:`Explanation`.

    Raises:
        ~headwise.inspect.NoAttentionError: a model without attention heads.
    """
    model = classifier.model
    modules = attention_layers(model)
    tok = classifier.tokenizer
    total = int(tok([text], max_length=None)["attention_mask"].sum())
    batch = tok([text], max_length=classifier.max_length)
    ids = batch["input_ids"][0].tolist()
    device = next(model.parameters()).device
    with capture_attention(modules, to_cpu=True) as cap:
        logits = model(input_ids=batch["input_ids"].to(device),
                       attention_mask=batch["attention_mask"].bool().to(device))["logits"]
    attention = torch.stack([cap[m][0][0] for m in modules]).float()  # (layers, heads, q, k)
    rollout = torch.from_numpy(rollout_matrix(attention.numpy()))
    return Explanation(tokens=_tokens(classifier, text, ids), attention=attention,
                       rollout=rollout, logits=logits[0].double().cpu().numpy(),
                       truncated=total > len(ids), total_tokens=total)


def _tokens(classifier: IntentClassifier, text: str, ids: list[int]
            ) -> list[tuple[str, int | None, int | None, bool]]:
    tok = classifier.tokenizer
    lead = int(bool(ids) and tok.cls_token_id is not None and ids[0] == tok.cls_token_id)
    tail = int(len(ids) > lead and tok.sep_token_id is not None and ids[-1] == tok.sep_token_id)
    body = ids[lead:len(ids) - tail]
    names = tok.tokenize(text)[:len(body)]
    spans = tok.offsets(text)[:len(body)]
    if len(names) != len(body) or len(spans) != len(body):
        names = [tok.backend.id_to_token(i) or "" for i in body]
        spans = [(None, None)] * len(body)
    out: list[tuple[str, int | None, int | None, bool]] = []
    if lead:
        out.append((tok.backend.id_to_token(ids[0]), None, None, True))
    out.extend((name, s, e, False) for name, (s, e) in zip(names, spans, strict=True))
    if tail:
        out.append((tok.backend.id_to_token(ids[-1]), None, None, True))
    return out

"""Search over a decoder's next-token distributions: greedy search and beam search.

Both searches are model-agnostic. They drive a *step function* that takes the token
prefixes decoded so far, ``(rows, t)`` starting with BOS, and returns the next-token
logits ``(rows, vocab)``. A cached step function feeds only the columns its KV cache has
not seen; an uncached one recomputes the whole prefix. Beam search also takes a
*reorder* function that makes the step function's state (the KV caches) follow the
surviving beams: ``row i <- row index[i]``.

Beam search keeps ``num_beams`` live hypotheses per batch row, scored by the sum of
their token log-probabilities. A hypothesis that ends in EOS is finished and scored by

    sum_logprob / length ** length_penalty

(Wu et al. 2016 / Hugging Face; ``length`` counts the EOS, as fairseq does). With
``length_penalty`` > 0 longer hypotheses are favoured, with < 0 shorter ones; 0 ranks by
the plain sum of log-probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

#: ``step(prefixes (rows, t)) -> next-token logits (rows, vocab)``
StepFn = Callable[[Tensor], Tensor]
#: ``reorder(index (rows,))``: row ``i`` of the decoding state becomes row ``index[i]``
ReorderFn = Callable[[Tensor], None]


def check_generation_args(max_new_tokens: int, num_beams: int, min_new_tokens: int,
                          length_penalty: float, early_stopping: bool, use_cache: bool) -> None:
    """Raise a clear error for a bad generation argument.

    Raises:
        TypeError: a non-integer count or a non-boolean flag.
        ValueError: ``max_new_tokens < 1``, ``num_beams < 1``, ``min_new_tokens`` outside
            ``[0, max_new_tokens]``, or a non-finite ``length_penalty``.
    """
    for name, val in (("max_new_tokens", max_new_tokens), ("num_beams", num_beams),
                      ("min_new_tokens", min_new_tokens)):
        if isinstance(val, bool) or not isinstance(val, int):
            raise TypeError(f"{name} must be an int, got {type(val).__name__}")
    for name, val in (("early_stopping", early_stopping), ("use_cache", use_cache)):
        if not isinstance(val, bool):
            raise TypeError(f"{name} must be a bool, got {type(val).__name__}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    if not 0 <= min_new_tokens <= max_new_tokens:
        raise ValueError(f"min_new_tokens must be in [0, max_new_tokens={max_new_tokens}], "
                         f"got {min_new_tokens}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
            or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")


def _log_probs(logits: Tensor, step: int, min_new_tokens: int, eos_token_id: int) -> Tensor:
    """Log-softmax in float32 (float64 stays float64), EOS forbidden before the minimum."""
    if logits.ndim != 2:
        raise ValueError(f"the step function must return (rows, vocab) logits, got shape "
                         f"{tuple(logits.shape)}")
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    logp = torch.log_softmax(logits.to(dtype), dim=-1)
    if step < min_new_tokens:
        logp = logp.clone()
        logp[:, eos_token_id] = float("-inf")
    return logp


def greedy_search(step: StepFn, batch_size: int, *, bos_token_id: int, eos_token_id: int,
                  pad_token_id: int, max_new_tokens: int, min_new_tokens: int = 0,
                  device: torch.device | str | None = None) -> Tensor:
    """Pick the most probable next token until every row has produced EOS.

    Args:
        step: the step function (see the module docstring).
        batch_size: rows decoded together.
        bos_token_id, eos_token_id, pad_token_id: special tokens.
        max_new_tokens: at most this many tokens per row (EOS included).
        min_new_tokens: EOS is forbidden before this many tokens.
        device: of the token tensors.

    Returns:
        (batch_size, out_len) token ids without the BOS; after a row's EOS, pad tokens.
        ``out_len`` is the longest row (at most ``max_new_tokens``).
    """
    tokens = torch.full((batch_size, 1), bos_token_id, dtype=torch.long, device=device)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)
    for t in range(max_new_tokens):
        logp = _log_probs(step(tokens), t, min_new_tokens, eos_token_id)
        nxt = logp.argmax(-1).masked_fill(done, pad_token_id)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done = done | (nxt == eos_token_id)
        if bool(done.all()):
            break
    return tokens[:, 1:]


def normalised_score(sum_logprob: float, length: int, length_penalty: float) -> float:
    """``sum_logprob / length ** length_penalty``: the score of a finished hypothesis."""
    return sum_logprob / length ** length_penalty


class _Finished:
    """The best ``num_beams`` finished hypotheses of one batch row."""

    def __init__(self, num_beams: int, length_penalty: float) -> None:
        self.num_beams, self.length_penalty = num_beams, length_penalty
        self.items: list[tuple[float, list[int]]] = []  # (normalised score, tokens)

    def add(self, tokens: list[int], sum_logprob: float) -> None:
        score = normalised_score(sum_logprob, len(tokens), self.length_penalty)
        self.items.append((score, tokens))
        self.items.sort(key=lambda item: item[0], reverse=True)
        del self.items[self.num_beams:]

    def cannot_improve(self, best_live: float, cur_len: int, max_len: int) -> bool:
        """True when ``num_beams`` hypotheses are finished and no live beam (best sum of
        log-probabilities ``best_live``, ``cur_len`` tokens) can beat the worst of them.

        Log-probabilities are <= 0, so a continuation's sum is at most ``best_live``; its
        length lies in ``[cur_len + 1, max_len]``. The bound takes the most favourable
        length: the longest when ``length_penalty`` > 0, else the shortest.
        """
        if best_live == float("-inf"):
            return True
        if len(self.items) < self.num_beams:
            return False
        length = max_len if self.length_penalty > 0 else min(cur_len + 1, max_len)
        return self.items[-1][0] >= normalised_score(best_live, length, self.length_penalty)

    def best(self) -> list[int]:
        return self.items[0][1] if self.items else []


def beam_search(step: StepFn, reorder: ReorderFn, batch_size: int, num_beams: int, *,
                bos_token_id: int, eos_token_id: int, pad_token_id: int, max_new_tokens: int,
                min_new_tokens: int = 0, length_penalty: float = 1.0,
                early_stopping: bool = True,
                device: torch.device | str | None = None) -> Tensor:
    """Beam search: ``num_beams`` hypotheses per batch row, the best finished one returned.

    Rows of the step function are ``batch_size * num_beams``, beams of one batch row
    adjacent (row ``b * num_beams + k``). Each step extends every live beam by every
    token and keeps, per batch row, the ``2 * num_beams`` best candidates (sum of
    log-probabilities): an EOS candidate among the first ``num_beams`` finishes a
    hypothesis, the best ``num_beams`` other candidates become the next live beams.

    Args:
        step, reorder: the step and reorder functions (see the module docstring).
        batch_size: source rows.
        num_beams: beams per row.
        bos_token_id, eos_token_id, pad_token_id: special tokens.
        max_new_tokens: at most this many tokens per hypothesis (EOS included); live beams
            still running then are finished as they are, without EOS.
        min_new_tokens: EOS is forbidden before this many tokens.
        length_penalty: exponent of the length normalisation (module docstring).
        early_stopping: stop a row once ``num_beams`` hypotheses are finished and no live
            beam can beat them (this never changes the result); False runs every row to
            ``max_new_tokens``.
        device: of the token tensors.

    Returns:
        (batch_size, out_len) token ids of each row's best hypothesis, without the BOS,
        padded with pad tokens after the EOS.
    """
    b_sz, k = batch_size, num_beams
    neg_inf = float("-inf")
    tokens = torch.full((b_sz * k, 1), bos_token_id, dtype=torch.long, device=device)
    live = [[0.0] + [neg_inf] * (k - 1) for _ in range(b_sz)]  # only beam 0 starts alive
    finished = [_Finished(k, length_penalty) for _ in range(b_sz)]
    done = [False] * b_sz
    for t in range(max_new_tokens):
        logp = _log_probs(step(tokens), t, min_new_tokens, eos_token_id)
        vocab = logp.shape[-1]
        scores = torch.tensor(live, dtype=logp.dtype, device=logp.device).view(-1, 1)
        cand = (scores + logp).view(b_sz, k * vocab)
        top_s, top_i = cand.topk(min(2 * k, k * vocab), dim=1)
        top_s, top_i = top_s.tolist(), top_i.tolist()
        prefixes: list[list[int]] | None = None  # fetched from the device only on an EOS
        beam_of = [[0] * k for _ in range(b_sz)]
        new_tok = [[pad_token_id] * k for _ in range(b_sz)]
        for b in range(b_sz):
            live[b] = [neg_inf] * k
            if done[b]:
                continue
            j = 0
            for rank, (s, i) in enumerate(zip(top_s[b], top_i[b], strict=True)):
                if s == neg_inf or j == k:
                    break
                beam, tok = divmod(i, vocab)
                if tok == eos_token_id:
                    if rank < k:
                        if prefixes is None:
                            prefixes = tokens[:, 1:].tolist()
                        finished[b].add(prefixes[b * k + beam] + [tok], s)
                    continue
                live[b][j], beam_of[b][j], new_tok[b][j] = s, beam, tok
                j += 1
            if early_stopping or live[b][0] == neg_inf:  # (no live beam: nothing to wait for)
                done[b] = finished[b].cannot_improve(live[b][0], t + 1, max_new_tokens)
        index = torch.tensor([b * k + beam for b in range(b_sz) for beam in beam_of[b]],
                             dtype=torch.long, device=tokens.device)
        new = torch.tensor(new_tok, dtype=torch.long, device=tokens.device).view(-1, 1)
        tokens = torch.cat([tokens.index_select(0, index), new], dim=1)
        if all(done) or t == max_new_tokens - 1:
            break
        reorder(index)
    if not all(done):  # ran to max_new_tokens: live beams finish as they are
        rows = tokens[:, 1:].tolist()
        for b in range(b_sz):
            if not done[b]:
                for j in range(k):
                    if live[b][j] != neg_inf:
                        finished[b].add(rows[b * k + j], live[b][j])
    best = [finished[b].best() for b in range(b_sz)]
    out_len = max(1, max(len(seq) for seq in best))
    out = torch.full((b_sz, out_len), pad_token_id, dtype=torch.long, device=device)
    for b, seq in enumerate(best):
        if seq:
            out[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out

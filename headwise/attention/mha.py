"""Multi-head attention (Vaswani et al. 2017) with grouped-query heads, RoPE, GLU fusion.

``MultiHeadAttention(d_model, num_heads)`` is the layer of the paper:
``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O`` with
``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``. On top of it:

* ``num_kv_heads`` < ``num_heads``: grouped-query attention (GQA, Ainslie et al. 2023);
  ``num_kv_heads=1`` is multi-query attention (Shazeer 2019). K/V are shared by head
  groups inside the kernels, never copied per head.
* ``rope=True``: rotary position embeddings (Su et al.) on queries and keys.
* ``fusion="glu"``: heads are fused by a gated linear unit: a sigmoid gate per token and
  head, computed from the concatenated heads, weights each head before ``W_O``.
* per-head gates (a buffer of ones that inspection and pruning can set) and
  :meth:`MultiHeadAttention.prune_heads`, which shrinks the projections.
* a :class:`~headwise.attention.cache.KVCache` for incremental decoding.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headwise.attention.cache import KVCache
from headwise.attention.capture import active_capture
from headwise.attention.kernels import (
    BACKENDS,
    attend,
    math_attention,
    sdpa_attention,
    select_backend,
)
from headwise.attention.masks import AttentionPattern, as_pattern
from headwise.attention.positions import RotaryEmbedding

FUSIONS = ("concat", "glu")


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention with ``num_heads`` query heads.

    Args:
        d_model: model width (input and output size).
        num_heads: query heads.
        num_kv_heads: key/value heads (default ``num_heads``); must divide ``num_heads``.
        fusion: ``"concat"`` (Concat(heads) W_O) or ``"glu"`` (gated heads, then W_O).
        dropout: dropout on the attention weights while training.
        head_dim: size of each head (default ``d_model // num_heads``).
        bias: whether the projections have biases.
        context_dim: width of the cross-attention context when it differs from
            ``d_model`` (then K/V get their own projection); by default one fused
            projection serves both self-attention (Q, K, V from x) and cross-attention
            (Q from x, K and V from the context).
        rope: apply rotary position embeddings (True, or a RotaryEmbedding to share).
        backend: the :func:`~headwise.attention.attend` backend (default ``"auto"``).

    Raises:
        ValueError: for inconsistent sizes or unknown fusion/backend names.
    """

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None,
                 fusion: str = "concat", dropout: float = 0.0, *, head_dim: int | None = None,
                 bias: bool = True, context_dim: int | None = None,
                 rope: bool | RotaryEmbedding = False, backend: str = "auto") -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if d_model <= 0 or num_heads <= 0 or num_kv_heads <= 0:
            raise ValueError(f"d_model, num_heads and num_kv_heads must be positive, got "
                             f"{d_model}, {num_heads}, {num_kv_heads}")
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads "
                             f"({num_kv_heads})")
        if head_dim is None:
            if d_model % num_heads:
                raise ValueError(f"d_model ({d_model}) must be divisible by num_heads "
                                 f"({num_heads}), or pass head_dim")
            head_dim = d_model // num_heads
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.head_dim, self.fusion, self.dropout, self.backend = head_dim, fusion, dropout, backend
        q_out, kv_out = num_heads * head_dim, num_kv_heads * head_dim
        if context_dim is None or context_dim == d_model:
            self.in_proj = nn.Linear(d_model, q_out + 2 * kv_out, bias=bias)
            self.q_proj = self.kv_proj = None
        else:
            self.in_proj = None
            self.q_proj = nn.Linear(d_model, q_out, bias=bias)
            self.kv_proj = nn.Linear(context_dim, 2 * kv_out, bias=bias)
        self.out_proj = nn.Linear(q_out, d_model, bias=bias)
        self.gate_proj = nn.Linear(q_out, num_heads) if fusion == "glu" else None
        if isinstance(rope, RotaryEmbedding):
            self.rope: RotaryEmbedding | None = rope
        else:
            self.rope = RotaryEmbedding(head_dim) if rope else None
        self.register_buffer("head_gate", torch.ones(num_heads))
        self.register_buffer("head_ids", torch.arange(num_heads), persistent=False)
        self._gates_are_ones = True  # skip the gate multiply on the default path
        self.register_load_state_dict_post_hook(lambda module, _: module._sync_gate_flag())
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections (each of Q, K, V on its own), zero biases."""
        q_out, kv_out = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        if self.in_proj is not None:
            w = self.in_proj.weight.data
            for part in (w[:q_out], w[q_out: q_out + kv_out], w[q_out + kv_out:]):
                nn.init.xavier_uniform_(part)
            linears = [self.in_proj]
        else:
            nn.init.xavier_uniform_(self.q_proj.weight)
            nn.init.xavier_uniform_(self.kv_proj.weight[:kv_out])
            nn.init.xavier_uniform_(self.kv_proj.weight[kv_out:])
            linears = [self.q_proj, self.kv_proj]
        nn.init.xavier_uniform_(self.out_proj.weight)
        linears.append(self.out_proj)
        if self.gate_proj is not None:
            nn.init.xavier_uniform_(self.gate_proj.weight)
            linears.append(self.gate_proj)
        for lin in linears:
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    # ------------------------------------------------------------------------------
    def _project_q(self, x: Tensor) -> Tensor:
        q_out = self.num_heads * self.head_dim
        if self.in_proj is not None:
            b = None if self.in_proj.bias is None else self.in_proj.bias[:q_out]
            return F.linear(x, self.in_proj.weight[:q_out], b)
        return self.q_proj(x)

    def _project_kv(self, context: Tensor) -> Tensor:
        q_out = self.num_heads * self.head_dim
        if self.in_proj is not None:
            b = None if self.in_proj.bias is None else self.in_proj.bias[q_out:]
            return F.linear(context, self.in_proj.weight[q_out:], b)
        return self.kv_proj(context)

    def _heads(self, t: Tensor, n: int) -> Tensor:
        b, s, _ = t.shape
        return t.view(b, s, n, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, context: Tensor | None = None,
                mask: Tensor | AttentionPattern | None = None, cache: KVCache | None = None, *,
                positions: Tensor | None = None, bias: Tensor | None = None) -> Tensor:
        """Attend from ``x`` to itself (or to ``context``) and fuse the heads.

        Args:
            x: (batch, seq, d_model).
            context: (batch, ctx_len, context_dim) for cross-attention, else None.
            mask: boolean tensor broadcastable to (batch, heads, seq, keys) with True = may
                attend, or a pattern (e.g. ``masks.causal()``, ``masks.key_padding(...)``).
            cache: a KVCache. Self-attention: implies causal decoding and appends the new
                keys. Cross-attention: the projected context is stored on first use and
                reused afterwards (pass the same context each step).
            positions: absolute positions (seq,) or (batch, seq) for RoPE; default
                ``arange(seq)`` shifted by what the cache already holds.
            bias: additive float scores (ALiBi, T5 buckets) broadcastable to the scores.

        Returns:
            (batch, seq, d_model).

        Raises:
            ValueError: wrong input shapes, or a mask combined with a ring-buffer cache.
        """
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (batch, seq, {self.d_model}), got {tuple(x.shape)}")
        bsz, seq, _ = x.shape
        h, hk, d = self.num_heads, self.num_kv_heads, self.head_dim
        if context is None:
            if self.in_proj is None:
                raise ValueError("this layer was built for cross-attention (context_dim "
                                 "differs from d_model): pass context")
            qkv = F.linear(x, self.in_proj.weight, self.in_proj.bias)
            # split before transposing: the backward then concatenates the three gradients
            # straight into the projection's layout, without an extra copy
            q, k, v = (t.transpose(1, 2) for t in
                       qkv.view(bsz, seq, h + 2 * hk, d).split((h, hk, hk), dim=2))
            if self.rope is not None:
                if positions is None and cache is not None:
                    positions = torch.arange(cache.length, cache.length + seq, device=x.device)
                # positions None: 0..seq-1, read from the table without a data-dependent
                # range check (so the layer also traces for torch.export / ONNX)
                q, k = self.rope(q, positions), self.rope(k, positions)
            if cache is not None:
                k, v, cache_mask = cache.update(k, v)
                k, v = k.to(q.dtype), v.to(q.dtype)  # a float32 cache under autocast
                mask = self._merge_cache_mask(mask, cache_mask, cache)
        else:
            if context.ndim != 3 or context.shape[0] != bsz:
                raise ValueError(f"context must be (batch={bsz}, ctx_len, dim), got "
                                 f"{tuple(context.shape)}")
            q = self._heads(self._project_q(x), h)
            if cache is not None and cache.length > 0:
                k, v = cache.keys.to(q.dtype), cache.values.to(q.dtype)
            else:
                kv = self._project_kv(context).view(bsz, context.shape[1], 2 * hk, d)
                k, v = (t.transpose(1, 2) for t in kv.split((hk, hk), dim=2))
                if cache is not None:
                    cache.update(k, v, causal=False)
        p = self.dropout if self.training else 0.0
        cap = active_capture()
        if cap is not None and cap.wants(self):
            out, weights = attend(q, k, v, mask, backend="math", dropout_p=p,
                                  return_weights=True, bias=bias)
        else:
            weights = None
            out = self._direct(q, k, v, mask, bias, p)
            if out is None:
                out = attend(q, k, v, mask, backend=self.backend, dropout_p=p, bias=bias)
        if not self._gates_are_ones or self.head_gate.requires_grad:
            out = out * self.head_gate.view(1, h, 1, 1).to(out.dtype)
        out = out.transpose(1, 2)
        gate = None
        if self.gate_proj is not None:
            gate = torch.sigmoid(self.gate_proj(out.reshape(bsz, seq, h * d)))
            out = out * gate.unsqueeze(-1)
        if weights is not None:
            cap.record(self, weights, gate)
        return F.linear(out.reshape(bsz, seq, h * d), self.out_proj.weight, self.out_proj.bias)

    def _direct(self, q: Tensor, k: Tensor, v: Tensor, mask, bias: Tensor | None,
                dropout_p: float) -> Tensor | None:
        """The common case straight on its kernel, or None.

        With no mask, or a pattern for this batch, no bias and backend "auto"/"sdpa", this
        calls the kernel the dispatcher picks (:func:`~headwise.attention.kernels.select_backend`)
        when it is SDPA (:func:`~headwise.attention.kernels.sdpa_attention`: ``is_causal``
        where it expresses the pattern, else the smallest mask that broadcasts) or, for
        backend "auto", the math kernel (attention dropout or gradients over short keys on
        the CPU, with the smallest mask that broadcasts), without
        :func:`~headwise.attention.kernels.attend`'s per-call validation, which is
        measurable at short lengths: the shapes were built by this layer, so there is
        nothing to validate.
        """
        if bias is not None or self.backend not in ("auto", "sdpa"):
            return None
        if mask is not None and (not isinstance(mask, AttentionPattern)
                                 or mask.batch_size not in (None, q.shape[0])):
            return None
        choice = self.backend
        if choice == "auto":
            choice = select_backend(q, k, mask, dropout_p=dropout_p)
        scale = q.shape[-1] ** -0.5
        if choice == "math":
            dense = None if mask is None else mask.to_broadcast(q.shape[2], k.shape[2],
                                                                 device=q.device)
            return math_attention(q, k, v, dense, None, scale, dropout_p)[0]
        if choice != "sdpa":
            return None
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                                  enable_gqa=q.shape[1] != k.shape[1])
        return sdpa_attention(q, k, v, mask, None, scale, dropout_p)

    @staticmethod
    def _merge_cache_mask(mask, cache_mask: Tensor | None, cache: KVCache):
        if mask is None:
            return cache_mask
        if cache.window is not None:
            raise ValueError("a ring-buffer (windowed) KV cache orders keys by slot, not "
                             "position: it builds its own mask, pass mask=None")
        if cache_mask is None:
            return mask
        if isinstance(mask, AttentionPattern):
            return mask & as_pattern(cache_mask)
        return mask & cache_mask

    # ------------------------------------------------------------------------------
    def set_head_gates(self, gates: Tensor | Iterable[float]) -> None:
        """Set the per-head gates (1 = keep, 0 = silence; any value scales the head).

        Use this (not an in-place write to ``head_gate``) so the layer knows whether it
        can skip the gate multiply. Setting ``head_gate.requires_grad_()`` (for gradient
        based head importance) always applies the gates.
        """
        gates = torch.as_tensor(gates, dtype=self.head_gate.dtype, device=self.head_gate.device)
        if gates.shape != self.head_gate.shape:
            raise ValueError(f"expected {self.num_heads} gates, got shape {tuple(gates.shape)}")
        with torch.no_grad():
            self.head_gate.copy_(gates)
        self._sync_gate_flag()

    def _sync_gate_flag(self) -> None:
        self._gates_are_ones = bool((self.head_gate == 1).all())

    @torch.no_grad()
    def prune_heads(self, heads: Iterable[int]) -> None:
        """Remove query heads (indices of the current heads) and shrink the projections.

        With grouped-query attention every K/V group must keep the same number of query
        heads; a group that loses all of them loses its K/V head too. The original index
        of each remaining head stays in ``head_ids``.

        Raises:
            ValueError: out-of-range indices, removing every head, or uneven groups.
        """
        drop = sorted(set(int(i) for i in heads))
        if not drop:
            return
        h, hk, d = self.num_heads, self.num_kv_heads, self.head_dim
        if drop[0] < 0 or drop[-1] >= h:
            raise ValueError(f"head indices must be in [0, {h}), got {drop}")
        if len(drop) == h:
            raise ValueError("cannot prune every head of a layer")
        g = h // hk
        keep = [i for i in range(h) if i not in drop]
        per_group = [sum(1 for i in keep if i // g == j) for j in range(hk)]
        left = {c for c in per_group if c}
        if len(left) != 1:
            raise ValueError(f"pruning {drop} leaves K/V groups with unequal query heads "
                             f"{per_group}; prune evenly across groups")
        keep_kv = [j for j in range(hk) if per_group[j]]
        rows = lambda idx, base: [base + i * d + t for i in idx for t in range(d)]  # noqa: E731
        q_rows, k_rows = rows(keep, 0), rows(keep_kv, h * d)
        v_rows = rows(keep_kv, h * d + hk * d)
        if self.in_proj is not None:
            self.in_proj = _take_rows(self.in_proj, q_rows + k_rows + v_rows)
        else:
            self.q_proj = _take_rows(self.q_proj, q_rows)
            self.kv_proj = _take_rows(self.kv_proj, [r - h * d for r in k_rows + v_rows])
        cols = rows(keep, 0)
        out = nn.Linear(len(cols), self.d_model, bias=self.out_proj.bias is not None)
        out = out.to(self.out_proj.weight)
        out.weight.copy_(self.out_proj.weight[:, cols])
        if out.bias is not None:
            out.bias.copy_(self.out_proj.bias)
        self.out_proj = out
        if self.gate_proj is not None:
            gp = _take_rows(self.gate_proj, keep)
            gp.weight = nn.Parameter(gp.weight[:, cols].clone())
            gp.in_features = len(cols)
            self.gate_proj = gp
        self.head_gate = self.head_gate[keep].clone()
        self.head_ids = self.head_ids[keep].clone()
        self._sync_gate_flag()
        self.num_heads, self.num_kv_heads = len(keep), len(keep_kv)


def _take_rows(lin: nn.Linear, rows: list[int]) -> nn.Linear:
    new = nn.Linear(lin.in_features, len(rows), bias=lin.bias is not None).to(lin.weight)
    with torch.no_grad():
        new.weight.copy_(lin.weight[rows])
        if lin.bias is not None:
            new.bias.copy_(lin.bias[rows])
    return new

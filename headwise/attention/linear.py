"""Linear (kernel) attention: ``phi(q) . phi(k)`` replaces ``exp(q . k)``, O(n) time and memory.

With a positive feature map ``phi``, attention becomes

    out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j)),

so the keys are summarised once in a ``(features, d_v)`` state instead of an ``n x n``
score matrix. Causal attention sums over ``j <= i`` only: here as a chunked scan (a
masked quadratic product inside each chunk, plus the running state of all earlier chunks,
formed by a cumulative sum over chunk states), so memory stays O(n).

Feature maps:

* ``"elu"``: ``phi(x) = elu(x) + 1`` (Katharopoulos et al. 2020, "Transformers are RNNs").
  A different kernel from softmax, not an approximation of it.
* ``"favor"``: FAVOR+ positive orthogonal random features (Choromanski et al. 2021,
  "Rethinking Attention with Performers"): ``phi(x) = exp(w_r . x' - |x'|^2 / 2) / sqrt(m)``
  with ``x' = x d^-1/4``, so that ``E[phi(q) . phi(k)] = exp(q . k / sqrt(d))``, the
  softmax kernel. The error of that estimate falls as ``num_features`` grows;
  :func:`approximation_error` measures it against exact softmax attention.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from headwise.attention.kernels import attend
from headwise.attention.masks import causal as causal_mask

FEATURE_MAPS = ("elu", "favor")


def orthogonal_features(num_features: int, dim: int, seed: int = 0, *,
                        dtype: torch.dtype = torch.float32,
                        device: torch.device | str | None = None) -> Tensor:
    """Random projection ``(num_features, dim)`` of FAVOR+: orthogonal rows, Gaussian norms.

    Rows come in blocks of ``dim`` mutually orthogonal directions (QR of a Gaussian
    matrix, signs fixed so the directions are uniform on the sphere), each rescaled to
    the norm of an independent Gaussian vector, so every row is marginally ``N(0, I)``
    while rows of a block are exactly orthogonal.

    Args:
        num_features: number of random features ``m``.
        dim: size of the vectors being projected.
        seed: seed of the generator (the projection is deterministic given the seed).
        dtype, device: of the result.
    """
    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(-(-num_features // dim)):
        qmat, r = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
        # sign fix: without it QR's convention biases each direction (not Haar-uniform)
        blocks.append((qmat * torch.sign(torch.diagonal(r))).T)
    w = torch.cat(blocks)[:num_features]
    norms = torch.randn(num_features, dim, generator=gen, dtype=torch.float64).norm(dim=1)
    return (w * norms[:, None]).to(dtype=dtype, device=device)


def elu_features(x: Tensor) -> Tensor:
    """``elu(x) + 1``: positive features of Katharopoulos et al. (2020)."""
    return F.elu(x) + 1.0


def favor_features(x: Tensor, w: Tensor, *, is_query: bool) -> Tensor:
    """FAVOR+ positive random features of ``x`` (..., L, d) for the softmax kernel.

    ``phi(x) = exp(w x' - |x'|^2 / 2 - c) / sqrt(m)`` with ``x' = x d^-1/4``. The
    stabiliser ``c`` (detached) is each query row's maximum, or the maximum over all keys
    of a head; either cancels between the numerator and the normaliser of attention.

    Args:
        x: queries or keys (..., L, d).
        w: projection (m, d) from :func:`orthogonal_features`.
        is_query: stabilise per row (queries) or per head over all rows (keys).
    """
    xs = x * x.shape[-1] ** -0.25
    proj = xs @ w.T.to(x.dtype)
    proj = proj - 0.5 * xs.pow(2).sum(-1, keepdim=True)
    if is_query:
        c = proj.amax(-1, keepdim=True)
    else:
        c = proj.amax((-1, -2), keepdim=True)
    return torch.exp(proj - c.detach()) / math.sqrt(w.shape[0])


def _features(q: Tensor, k: Tensor, feature_map: str, num_features: int | None,
              seed: int) -> tuple[Tensor, Tensor]:
    if feature_map == "elu":
        if num_features is not None:
            raise ValueError("num_features applies to feature_map='favor' only")
        return elu_features(q), elu_features(k)
    d = q.shape[-1]
    m = default_num_features(d) if num_features is None else num_features
    if not isinstance(m, int) or isinstance(m, bool) or m <= 0:
        raise ValueError(f"num_features must be a positive int, got {num_features!r}")
    w = orthogonal_features(m, d, seed, dtype=q.dtype, device=q.device)
    return favor_features(q, w, is_query=True), favor_features(k, w, is_query=False)


def default_num_features(dim: int) -> int:
    """Performer's default ``m = round(d log d)`` random features (at least ``d``)."""
    return max(dim, round(dim * math.log(dim)))


def _noncausal(fq: Tensor, fk: Tensor, v: Tensor, eps: float) -> Tensor:
    """fq (B, Hk, G, Lq, m), fk (B, Hk, Lk, m), v (B, Hk, Lk, dv) -> (B, Hk, G, Lq, dv)."""
    kv = fk.transpose(-1, -2) @ v  # (B, Hk, m, dv)
    z = fk.sum(-2)  # (B, Hk, m)
    num = fq @ kv.unsqueeze(2)
    den = (fq @ z[:, :, None, :, None]).clamp_min(eps)
    return num / den


def _causal(fq: Tensor, fk: Tensor, v: Tensor, chunk: int, eps: float) -> Tensor:
    """Chunked causal scan; shapes as :func:`_noncausal` with ``Lq == Lk``."""
    b, hk, g, n, m = fq.shape
    dv = v.shape[-1]
    nc = -(-n // chunk)
    pad = nc * chunk - n
    if pad:  # padded keys have zero features, so they add nothing to any state
        fq, fk, v = F.pad(fq, (0, 0, 0, pad)), F.pad(fk, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))
    fq = fq.view(b, hk, g, nc, chunk, m)
    fk = fk.view(b, hk, nc, chunk, m)
    v = v.view(b, hk, nc, chunk, dv)
    # state of everything before each chunk: exclusive cumulative sum of chunk states
    kv = fk.transpose(-1, -2) @ v  # (B, Hk, nc, m, dv)
    kv_prev = kv.cumsum(2) - kv
    z = fk.sum(-2)  # (B, Hk, nc, m)
    z_prev = z.cumsum(2) - z
    inter = fq @ kv_prev.unsqueeze(2)  # (B, Hk, G, nc, chunk, dv)
    inter_den = (fq @ z_prev[:, :, None, :, :, None]).squeeze(-1)
    tri = torch.ones(chunk, chunk, dtype=torch.bool, device=fq.device).tril()
    scores = (fq @ fk.unsqueeze(2).transpose(-1, -2)).masked_fill(~tri, 0.0)
    num = inter + scores @ v.unsqueeze(2)
    den = (inter_den + scores.sum(-1)).clamp_min(eps)
    out = num / den.unsqueeze(-1)
    return out.reshape(b, hk, g, nc * chunk, dv)[..., :n, :]


def linear_attention(q: Tensor, k: Tensor, v: Tensor, feature_map: str = "elu",
                     causal: bool = False, *, num_features: int | None = None, seed: int = 0,
                     chunk_size: int = 64, eps: float = 1e-6) -> Tensor:
    """Kernelised attention with a positive feature map, O(n) in time and memory.

    Args:
        q: (batch, heads, q_len, d).
        k: (batch, kv_heads, k_len, d); heads a multiple of kv_heads (grouped queries).
        v: (batch, kv_heads, k_len, d_v).
        feature_map: ``"elu"`` (``elu + 1``) or ``"favor"`` (FAVOR+ random features
            estimating softmax attention with scale ``1 / sqrt(d)``).
        causal: query ``i`` sees keys ``j <= i`` (needs ``q_len == k_len``).
        num_features: random features of ``"favor"`` (default ``round(d log d)``).
        seed: seed of the FAVOR+ projection (shared by all heads).
        chunk_size: chunk length of the causal scan (any positive value; memory is
            O(n * (chunk_size + m * d_v / chunk_size))).
        eps: lower bound of the normaliser ``phi(q) . sum phi(k)``.

    Returns:
        (batch, heads, q_len, d_v) in q's dtype (computed in float32 for half types).

    Raises:
        ValueError: unknown feature map, bad sizes or options, or causal with
            ``q_len != k_len``.
    """
    if feature_map not in FEATURE_MAPS:
        raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {feature_map!r}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be 4-D (batch, heads, seq, dim), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    if k.shape[0] != b or v.shape[0] != b or k.shape[-1] != d or v.shape[1:3] != k.shape[1:3]:
        raise ValueError(f"inconsistent shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    if h % hk:
        raise ValueError(f"q heads ({h}) must be a multiple of k/v heads ({hk})")
    if causal and lq != lk:
        raise ValueError(f"causal linear attention needs q_len == k_len, got {lq} and {lk}")
    if not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    with torch.autocast(q.device.type, enabled=False):
        fq, fk = _features(q.to(ct), k.to(ct), feature_map, num_features, seed)
        fq = fq.view(b, hk, h // hk, lq, fq.shape[-1])
        vc = v.to(ct)
        out = _causal(fq, fk, vc, chunk_size, eps) if causal else _noncausal(fq, fk, vc, eps)
    return out.reshape(b, h, lq, v.shape[-1]).to(q.dtype)


def approximation_error(q: Tensor, k: Tensor, v: Tensor, feature_map: str = "favor",
                        causal: bool = False, **kwargs) -> float:
    """Relative error of :func:`linear_attention` against exact softmax attention.

    ``||linear - softmax||_F / ||softmax||_F``, where softmax attention uses scale
    ``1 / sqrt(d)`` (and a causal mask when ``causal``). For ``"favor"`` it is the error of
    the random-feature estimate; for ``"elu"`` it says how far that different kernel is
    from softmax on these inputs.

    Args:
        q, k, v, feature_map, causal: as for :func:`linear_attention`.
        **kwargs: further keyword arguments of :func:`linear_attention`.

    Returns:
        The relative Frobenius error, a float.
    """
    with torch.no_grad():
        approx = linear_attention(q, k, v, feature_map, causal, **kwargs).double()
        exact = attend(q.double(), k.double(), v.double(), causal_mask() if causal else None,
                       backend="math")
    return float((approx - exact).norm() / exact.norm())


__all__ = [
    "FEATURE_MAPS",
    "approximation_error",
    "default_num_features",
    "elu_features",
    "favor_features",
    "linear_attention",
    "orthogonal_features",
]

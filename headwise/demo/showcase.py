"""A short tour of the attention core, run by ``headwise demo`` until the intent demo lands.

It renders the mask patterns, checks every backend against a float64 reference on each
pattern, times them (median of repeats, measured here and now), and shows what the
dispatcher picks and what ``capture_attention`` records.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm import tqdm

from headwise.attention import MultiHeadAttention, attend, capture_attention, select_backend
from headwise.attention import masks as M


@dataclass
class Row:
    """One line of the backend table."""

    pattern: str
    backend: str
    max_err: float
    median_ms: float


def render(mask: torch.Tensor) -> str:
    """Draw a 2-D boolean mask with one character per cell."""
    return "\n".join("".join("█" if v else "·" for v in row) for row in mask.tolist())


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def patterns(n: int) -> dict[str, M.AttentionPattern]:
    """The showcase patterns for sequence length ``n``."""
    return {
        "causal": M.causal(),
        "sliding_window(4)": M.sliding_window(max(1, n // 4)) if n > 16 else M.sliding_window(4),
        "window | global([0])": M.sliding_window(max(1, n // 8)) | M.global_tokens([0]),
        "bigbird": M.bigbird(max(1, n // 8), 1, seed=0),
        "documents": M.documents([n // 4, n // 2, n - n // 4 - n // 2]),
    }


def run(n: int = 1024, repeats: int = 5, heads: int = 8, head_dim: int = 64,
        show_masks: bool = True) -> list[Row]:
    """Run the tour and print it; returns the measured backend table.

    Args:
        n: sequence length of the timing runs.
        repeats: timed repeats per backend (the median is reported).
        heads, head_dim: attention shape (batch 1).
        show_masks: print 16 x 16 renderings of each pattern.
    """
    torch.manual_seed(0)
    if show_masks:
        print("Mask patterns at length 16 (█ = may attend):\n")
        for name, pat in patterns(16).items():
            print(f"{name}\n{render(pat.to_dense(16)[0, 0])}\n")
    q = torch.randn(1, heads, n, head_dim)
    k = torch.randn(1, heads, n, head_dim)
    v = torch.randn(1, heads, n, head_dim)
    rows: list[Row] = []
    work = [(name, pat, be) for name, pat in patterns(n).items()
            for be in ("math", "sdpa", "tiled")]
    print(f"Backends at N={n}, {heads} heads, head dim {head_dim} (float32, forward):")
    for name, pat, backend in tqdm(work, desc="measuring", unit="run", leave=False):
        ref = attend(q.double(), k.double(), v.double(), pat, backend="math")
        with torch.inference_mode():
            out = attend(q, k, v, pat, backend=backend)
            ms = _median_ms(lambda pat=pat, backend=backend: attend(q, k, v, pat, backend=backend),
                            repeats)
        rows.append(Row(name, backend, (out.double() - ref).abs().max().item(), ms))
    print(f"{'pattern':<22} {'backend':<7} {'max |err| vs f64':>16} {'median ms':>10}  auto")
    for r in rows:
        pick = select_backend(q, k, patterns(n)[r.pattern])
        mark = "<-" if pick == r.backend else ""
        print(f"{r.pattern:<22} {r.backend:<7} {r.max_err:>16.2e} {r.median_ms:>10.2f}  {mark}")
    mha = MultiHeadAttention(heads * 8, heads, num_kv_heads=max(1, heads // 4), rope=True).eval()
    x = torch.randn(2, 12, heads * 8)
    with torch.no_grad(), capture_attention() as cap:
        mha(x, mask=M.causal() & M.key_padding([12, 7]))
    w = cap[mha][0]
    ent = -(w.clamp_min(1e-12).log() * w).sum(-1).mean((0, 2))
    print(f"\ncapture_attention: recorded weights {tuple(w.shape)} from a GQA layer "
          f"({heads} query heads, {mha.num_kv_heads} K/V heads, RoPE);")
    print("mean entropy per head (nats): " + ", ".join(f"{e:.2f}" for e in ent.tolist()))
    return rows

"""PNG figures of the report's views (matplotlib, Agg): the head grid, per-example head
heat maps, the pruning curves and the heads implicated in bad cases.

Chinese words are drawn with an installed CJK font (Noto Sans CJK, WenQuanYi, ...; the
project's set-up installs one); without one they render as boxes, without warnings.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np

from headwise._fonts import cjk_font
from headwise._fonts import quiet_fonts as _quiet_fonts


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _rc() -> dict[str, Any]:
    font = cjk_font()
    return {} if font is None else {"font.family": "sans-serif",
                                    "font.sans-serif": [font, "DejaVu Sans"]}


def head_grid_png(analysis: dict[str, Any], path: Path) -> Path:
    """Layer x head grid: colour = gate-gradient importance (else words-view entropy),
    text = the heads' roles."""
    L, H = analysis["model"]["layers"], analysis["model"]["heads"]
    if analysis.get("importance"):
        values, label = np.array(analysis["importance"]["gradient"]), "importance"
    else:
        values = np.array(analysis["stats"]["views"]["words"]["entropy_norm"], dtype=float)
        label = "entropy / log n"
    fig = _figure(max(6.0, 1.3 * H + 2), max(2.5, 1.0 * L + 1.5))
    ax = fig.add_subplot()
    im = ax.imshow(values, cmap="Blues", aspect="auto", vmin=0)
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
    fig.colorbar(im, ax=ax, label=label, fraction=0.04)
    for layer in range(L):
        for head in range(H):
            roles = [r["role"] for r in analysis["roles"][layer][head]][:3]
            dark = np.isfinite(values[layer, head]) and values[layer, head] > 0.6 * top
            ax.text(head, layer, "\n".join(roles) or "-", ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")
    ax.set_xticks(range(H))
    ax.set_yticks(range(L))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title("Head roles and importance")
    fig.tight_layout()
    fig.savefig(path)
    return path


def example_png(example: dict[str, Any], layer: int, head: int, shape: tuple[int, int],
                path: Path) -> Path:
    """Heat map of one head's word-level attention on one embedded example."""
    n = len(example["units"])
    w = np.frombuffer(base64.b64decode(example["weights"]), dtype=np.uint8)
    w = w.reshape(*shape, n, n)[layer, head] / 255.0
    side = max(4.0, 0.32 * n + 2)
    fig = _figure(side, side)
    ax = fig.add_subplot()
    ax.imshow(w, cmap="Blues", vmin=0, vmax=max(w.max(), 1e-6))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(example["units"], rotation=90, fontsize=8)
    ax.set_yticklabels(example["units"], fontsize=8)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"layer {layer}, head {head}: {example['predicted']}"
                 f"{'' if example.get('correct', True) else ' (wrong)'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return path


def pruning_png(pruning: dict[str, Any], path: Path, score: str = "accuracy") -> Path:
    """Accuracy (``score``: what it measures) against the share of heads removed:
    importance order vs random orders."""
    fig = _figure(6.4, 4.0)
    ax = fig.add_subplot()
    imp, rnd = pruning["importance"], pruning["random"]
    ax.fill_between(rnd["fraction"], rnd["min"], rnd["max"], color="C3", alpha=0.15)
    ax.plot(rnd["fraction"], rnd["accuracy"], "o-", color="C3", ms=3,
            label=f"random (mean of {len(rnd['runs'])})")
    ax.plot(imp["fraction"], imp["accuracy"], "o-", color="C0", ms=3,
            label="least important first")
    ax.axhline(pruning["base_accuracy"] - pruning["tolerance"], color="grey", ls="--", lw=1,
               label="1 point below the full model")
    ax.set_xlabel("share of heads removed")
    ax.set_ylabel(score)
    ax.set_title("Pruning curve")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path


def bad_cases_png(bad: dict[str, Any], path: Path) -> Path:
    """The heads whose features differ most between misclassified and correct examples."""
    heads = bad["heads"][:10][::-1]
    fig = _figure(6.4, max(2.0, 0.35 * len(heads) + 1.2))
    ax = fig.add_subplot()
    ax.barh(range(len(heads)), [h["mean_abs_diff"] for h in heads], color="C1")
    ax.set_yticks(range(len(heads)))
    ax.set_yticklabels([f"L{h['layer']} H{h['head']} {h['feature']}" for h in heads],
                       fontsize=8)
    ax.set_xlabel("mean |misclassified - correct of the same intent|")
    ax.set_title(f"Bad cases: {bad['misclassified']} misclassified")
    fig.tight_layout()
    fig.savefig(path)
    return path


def write_figures(analysis: dict[str, Any], directory: Path, *, examples: int = 4
                  ) -> dict[str, Path]:
    """Write every figure into ``directory``; return name -> path."""
    from matplotlib import rc_context

    directory.mkdir(parents=True, exist_ok=True)
    shape = (analysis["model"]["layers"], analysis["model"]["heads"])
    out: dict[str, Path] = {}
    with rc_context(_rc()), _quiet_fonts():
        out["head_grid"] = head_grid_png(analysis, directory / "head_grid.png")
        if analysis.get("pruning"):
            out["pruning"] = pruning_png(analysis["pruning"], directory / "pruning.png",
                                         analysis.get("score", "accuracy"))
        if analysis.get("bad_cases", {}).get("heads"):
            out["bad_cases"] = bad_cases_png(analysis["bad_cases"], directory / "bad_cases.png")
        if analysis.get("importance"):
            flat = int(np.argmax(np.array(analysis["importance"]["gradient"])))
        else:
            flat = 0
        layer, head = divmod(flat, shape[1])
        for k, ex in enumerate(analysis.get("examples", [])[:examples]):
            if ex.get("units"):
                out[f"example_{k}"] = example_png(ex, layer, head, shape,
                                                  directory / f"example_{k}.png")
    return out

"""Writing the head analysis: ``index.html``, ``stats.json`` and ``figures/*.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwise.inspect.figures import write_figures
from headwise.inspect.report_html import build_html


def without_weights(analysis: dict[str, Any]) -> dict[str, Any]:
    """The analysis without the embedded per-example weights (what ``stats.json`` holds)."""
    return {**analysis, "examples": [{k: v for k, v in ex.items() if k != "weights"}
                                     for ex in analysis.get("examples", [])]}


def write_report(analysis: dict[str, Any], out_dir: str | Path, *,
                 title: str = "Head analysis") -> dict[str, Path]:
    """Write the report of an analysis into ``out_dir`` (created).

    Args:
        analysis: from :func:`~headwise.inspect.analysis.inspect_classifier`.
        out_dir: the report directory.
        title: the page title.

    Returns:
        ``{"html", "json", <figure name>: path, ...}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"html": out / "index.html", "json": out / "stats.json"}
    paths["html"].write_text(build_html(analysis, title=title), encoding="utf-8")
    paths["json"].write_text(json.dumps(without_weights(analysis), indent=1, ensure_ascii=False,
                                        allow_nan=False) + "\n", encoding="utf-8")
    paths.update(write_figures(analysis, out / "figures"))
    return paths

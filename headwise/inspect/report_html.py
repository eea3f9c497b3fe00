"""The head-analysis report as one self-contained HTML file.

Everything is inline: the style, the script (vanilla JavaScript drawing on canvas and
building tables) and the data, as JSON in a ``<script type="application/json">``
element. There is no URL anywhere in the page, so it works opened from disk with the
network off. Chinese text uses the system's fonts through a CSS font stack ("Noto Sans
CJK SC", "WenQuanYi Micro Hei", ..., sans-serif).

The page shows what the analysis aggregated in Python; per example it embeds only the
few examples the viewer offers (word-level weights as base64 bytes), so it stays small
and responsive for large datasets and long inputs.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

_PAGE = """<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<h1>{title}</h1>
<p id="summary" class="muted"></p>

<h2>Heads: roles and importance</h2>
<div class="controls"><label>colour: <select id="color"></select></label>
<span class="muted small">click a head for its numbers; its view opens below</span></div>
<div class="row">
<table id="grid"></table>
<div id="detail"></div>
</div>

<h2 id="viewer">Examples: one head's attention</h2>
<div class="controls">
<select id="sel-example"></select><select id="sel-layer"></select><select id="sel-head"></select>
<span id="legend" class="legend small"></span>
</div>
<p id="example-info" class="muted"></p>
<canvas id="heatmap" width="10" height="10"></canvas>

<h2>Pruning: accuracy (a compound model: exact match) as heads are removed</h2>
<p class="muted small"><span style="color:#0969da">&#9679;</span> least important first
(gate gradients, recomputed after each step) &nbsp; <span style="color:#cf222e">&#9679;</span>
random order &nbsp; dashed: 1 point below the full model</p>
<canvas id="pruning" width="640" height="340"></canvas>
<p id="pruning-note" class="muted"></p>

<h2>Bad cases</h2>
<div id="bad"></div>

<h2>Faithfulness and rollout</h2>
<div id="faith"></div>

<script type="application/json" id="data">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""


def _asset(name: str) -> str:
    return resources.files("headwise.inspect").joinpath("assets", name).read_text("utf-8")


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element (no ``</`` or ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def build_html(analysis: dict[str, Any], *, title: str = "Head analysis") -> str:
    """The report page for an analysis from
    :func:`~headwise.inspect.analysis.inspect_classifier`.

    Args:
        analysis: the analysis dict (its ``examples`` carry the embedded weights).
        title: the page title.

    Returns:
        The HTML text.

    Raises:
        ValueError: values JSON cannot hold (NaN, infinity).
    """
    return _PAGE.format(title=html.escape(title), css=_asset("report.css"),
                        js=_asset("report.js"), data=embed_json(analysis))

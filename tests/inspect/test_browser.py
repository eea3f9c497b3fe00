"""The report in headless Chromium: no console error, no request, a non-blank head grid.

Chromium is Debian's ``chromium`` package, which ``./run`` installs when it can; without it
these tests are skipped with a message saying so.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from browser_cdp import find_browser, load_page

BROWSER = find_browser()
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="headless Chromium is not installed (Debian: apt-get install "
    "chromium; ./run installs it when apt is usable as root)")


def test_page_loads_offline_without_errors(small_report):
    _, paths = small_report
    report = load_page(BROWSER, paths["html"], element="#grid", expressions={
        "ready": "document.body.dataset.ready",
        "cells": "document.querySelectorAll('#grid td.cell').length",
        "tags": "document.querySelectorAll('#grid .tag').length",
        "examples": "document.getElementById('sel-example').options.length",
        "heatmap": "document.getElementById('heatmap').width",
        # clicking a head redraws the grid, the detail and the heat map without errors
        "click": "document.querySelectorAll('#grid td.cell')[5].click(); "
                 "document.querySelector('#detail h3').textContent",
        # the explanation methods' table, in the analysis's order (best first)
        "methods": "[...document.querySelectorAll('#methods tr[data-method]')]"
                   ".map((r) => r.dataset.method).join(',')",
    })
    assert report.errors == []
    assert report.requests == [paths["html"].resolve().as_uri()]  # the page itself only
    v = report.values
    assert v["ready"] == "1" and v["cells"] == 8 and v["examples"] == 4 and v["heatmap"] > 100
    assert v["click"] == "Layer 1, head 1"
    analysis, _ = small_report
    assert v["methods"] == ",".join(r["method"] for r in analysis["methods"]["methods"])
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(report.screenshot)).convert("RGB"), dtype=float)
    assert image.shape[0] > 50 and image.shape[1] > 200
    assert image.std() > 10  # not one flat colour
    assert (image.sum(-1) < 700).mean() > 0.05  # a good share of non-white pixels


def _tile(obj, layers, heads):
    """Grow every (2, 4) layer x head table in the analysis to (layers, heads)."""
    if isinstance(obj, dict):
        return {k: _tile(v, layers, heads) for k, v in obj.items()}
    if isinstance(obj, list) and len(obj) == 2 and all(isinstance(r, list) and len(r) == 4
                                                       for r in obj):
        return [[obj[la % 2][h % 4] for h in range(heads)] for la in range(layers)]
    if isinstance(obj, list):
        return [_tile(v, layers, heads) for v in obj]
    return obj


def test_page_renders_a_big_model_and_long_inputs_without_errors(small_report, tmp_path):
    import base64

    from headwise.inspect.report_html import build_html

    analysis, _ = small_report
    big = _tile(analysis, 12, 12)
    big["model"] = {**big["model"], "layers": 12, "heads": 12}
    big["data"] = {**big["data"], "examples": 5000, "max_tokens": 512}
    rng = np.random.default_rng(0)
    units = 48  # what the embedding budget gives 12 x 12 heads and 12 examples
    ex = dict(big["examples"][0])
    ex.update(units=[f"词{k}" for k in range(units)], special=[False] * units,
              categories={c: [1, 5] for c in big["categories"]}, rollout=[1 / units] * units,
              weights=base64.b64encode(rng.integers(0, 20, 144 * units * units, dtype=np.uint8)
                                       .tobytes()).decode())
    big["examples"] = [ex] * 12
    big["bad_cases"]["cases"] = (big["bad_cases"]["cases"] * 100)[:100]
    page = tmp_path / "big.html"
    page.write_text(build_html(big), encoding="utf-8")
    assert page.stat().st_size < 8_000_000
    # no wall-clock bound here (speed targets live in benchmarks, not in timed tests): the
    # page must render every head's cell and redraw on a click without a script error
    report = load_page(BROWSER, page, element="#grid", expressions={
        "cells": "document.querySelectorAll('#grid td.cell').length",
        "redrawn": "(() => { document.querySelectorAll('#grid td.cell')[100].click(); "
                   "return document.querySelectorAll('#grid td.cell').length; })()"})
    assert report.errors == []
    assert report.values["cells"] == 144 and report.values["redrawn"] == 144

"""``GET /playground``: a page of the service where a person types messages and sees, side by
side, what the served model answers and why.

For each message the page shows the answered intents with their calibrated confidences,
the out-of-scope decision (the ``decision`` of ``/v1/predict``: its score against the
threshold), the slots with their normalised values (compound models), the tokens coloured
by their attribution (or by attention rollout when the explanation carries none; for a
message over the model's maximum length, a line saying which window was explained and
which characters it covers: ``/v1/explain``'s ``window``), and the attention of every layer
and head with the heads' roles. It calls the service's own API
(``POST /v1/predict``, ``POST /v1/explain``, ``GET /playground/heads``) from the browser.

The key: with ``--api-key-file`` every API call needs a key, and a browser cannot add a
header to a navigation. The page itself, its script and its style are therefore static and
open (:data:`PLAYGROUND_OPEN_PATHS`): they hold no data, no model name, nothing that
depends on the service. The page asks for the key (or reads it from the URL fragment,
``/playground#key=KEY``, which a browser never sends to a server, so it lands in no access
log, and removes it from the address bar at once) and sends it as ``X-API-Key`` on every
call; every answer with data goes through the access guard and its rate limit like any
other call, and a refusal (401, 429, 422 for an over-long text ...) is shown with its
message. The key is kept in the tab's ``sessionStorage`` only.

Self-contained: the page loads nothing but its own two files, served here (no CDN, no web
font: Chinese text uses the system's fonts, as the offline report does), and a
``Content-Security-Policy`` of ``'self'`` makes the browser refuse any other origin.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from headwise.inspect.forward import NoAttentionError, attention_layers
from headwise.models.config import ModelConfig
from headwise.serve.state import ServiceState

__all__ = ["PLAYGROUND_ASSETS", "PLAYGROUND_CSP", "PLAYGROUND_OPEN_PATHS", "add_playground",
           "construction_roles", "playground_heads", "read_analysis_roles"]

#: the page's files, served at /playground/assets/NAME
PLAYGROUND_ASSETS = ("playground.js", "playground.css")
#: the paths that need no key: the static page and its files (no data in them)
PLAYGROUND_OPEN_PATHS = ("/playground", *(f"/playground/assets/{n}" for n in PLAYGROUND_ASSETS))
#: what the browser may load for the page: its own files and calls to its own origin only
PLAYGROUND_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                  "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                  "form-action 'none'; frame-ancestors 'none'")
_HEADERS = {"Content-Security-Policy": PLAYGROUND_CSP, "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff"}
_MEDIA = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}

_PAGE = """<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>headwise playground</title>
<link rel="stylesheet" href="playground/assets/playground.css">
<script defer src="playground/assets/playground.js"></script>
</head>
<body>
<header>
<h1>headwise playground</h1>
<form id="key-form" autocomplete="off">
<label>API key <input id="key" type="password" placeholder="only if the service has keys"
 spellcheck="false"></label>
<button type="submit" id="key-use">use</button>
<span id="model" class="muted"></span>
</form>
</header>
<p class="muted small">Type a message (Chinese or English), add others beside it (a phrasing
and its negation, a number changed) and press <b>Explain</b> (Ctrl+Enter).
Tokens: <span class="swatch pos">for</span> pushes towards the answered intent,
<span class="swatch neg">against</span> pushes away (attribution: integrated gradients;
<code>headwise inspect</code> ranks the explanation methods by their deletion curves for a
model); without attribution they are shaded by attention rollout.</p>
<div class="controls">
<button id="add" type="button">+ add a message</button>
<button id="run" type="button" class="primary">Explain</button>
<span id="status" class="muted" role="status"></span>
</div>
<div id="columns"></div>
<noscript>This page needs JavaScript (it calls the service's own API).</noscript>
</body>
</html>
"""


def _asset(name: str) -> str:
    return resources.files("headwise.serve").joinpath("assets", name).read_text("utf-8")


def construction_roles(model: Any) -> list[list[list[dict[str, str]]]] | None:
    """The roles a model's heads were built with: the heads of ``ModelConfig.number_heads``
    and ``negation_heads`` get a learned score bias towards number / negation tokens in
    every encoder layer.

    Args:
        model: the served network (None, or one without a :class:`ModelConfig`: no roles).

    Returns:
        ``roles[layer][head]``: ``[{"role", "evidence", "source": "built"}]``, or None.
    """
    config = getattr(model, "config", None)
    if not isinstance(config, ModelConfig) or config.model_type == "bilstm":
        return None
    built = {"number": config.number_heads or [], "negation": config.negation_heads or []}
    return [[[{"role": role, "source": "built",
               "evidence": f"built {role}-aware: a learned attention bias towards {role} "
                           f"tokens (ModelConfig.{role}_heads)"}
              for role, heads in built.items() if head in heads]
             for head in range(config.num_heads)] for _ in range(config.num_layers)]


def read_analysis_roles(path: str | Path) -> list[list[list[dict[str, Any]]]]:
    """The head roles of a head analysis (``stats.json`` of ``headwise inspect``).

    Raises:
        ValueError: the file holds no ``roles[layer][head]`` lists.
        OSError: it cannot be read.
    """
    data = json.loads(Path(path).read_text("utf-8"))
    roles = data.get("roles") if isinstance(data, dict) else None
    if not (isinstance(roles, list) and roles and all(
            isinstance(layer, list) and all(isinstance(h, list) for h in layer)
            for layer in roles)):
        raise ValueError(f"{path}: no head roles (the stats.json that `headwise inspect "
                         f"MODEL --data DATA --out DIR` writes has them)")
    return [[[{"role": str(r["role"]), "evidence": str(r.get("evidence", "")),
               "source": "analysis"} for r in head] for head in layer] for layer in roles]


def _has_attention(model: Any) -> bool:
    """Whether the served network has attention heads to draw (a BiLSTM, a TF-IDF model or
    an ensemble has none)."""
    if model is None:
        return False
    try:
        attention_layers(model)
    except NoAttentionError:
        return False
    return True


def playground_heads(state: ServiceState,
                     analysis: list[list[list[dict[str, Any]]]] | None) -> dict[str, Any]:
    """``GET /playground/heads``: the served model's name and the roles of its heads, by
    construction (:func:`construction_roles`) and, when the service was given one and its
    shape is the model's, by a head analysis (:func:`read_analysis_roles`)."""
    served = state.served
    model = getattr(served.predictor.classifier, "model", None)
    roles = construction_roles(model)
    note = None
    if analysis is not None:
        shape = None if roles is None else (len(roles), len(roles[0]))
        if shape is None or shape != (len(analysis), len(analysis[0])):
            note = "the head analysis given to the service is not of the served model's shape"
        else:
            roles = [[built + analysis[layer][head] for head, built in enumerate(row)]
                     for layer, row in enumerate(roles)]
    return {"model": served.name, "has_attention": _has_attention(model), "roles": roles,
            "analysis": analysis is not None and note is None, "note": note}


def add_playground(app: FastAPI, state: ServiceState, *,
                   analysis_roles: str | None = None) -> None:
    """Add ``GET /playground``, its files and ``GET /playground/heads`` to the app.

    Args:
        app: the service's app.
        state: its state (the served model, read at each request: a reload is followed).
        analysis_roles: a head analysis' ``stats.json`` whose roles the page shows.

    Raises:
        ValueError, OSError: ``analysis_roles`` cannot be used (:func:`read_analysis_roles`).
    """
    analysis = read_analysis_roles(analysis_roles) if analysis_roles else None
    page = _PAGE
    assets = {name: _asset(name) for name in PLAYGROUND_ASSETS}

    @app.get("/playground", include_in_schema=False)
    async def playground() -> HTMLResponse:
        return HTMLResponse(page, headers={**_HEADERS, "Cache-Control": "no-cache"})

    @app.get("/playground/assets/{name}", include_in_schema=False)
    async def playground_asset(name: str) -> Response:
        if name not in assets:
            raise StarletteHTTPException(404, f"no such file: /playground/assets/{name}")
        return Response(assets[name], media_type=_MEDIA[name.rsplit(".", 1)[1]],
                        headers={**_HEADERS, "Cache-Control": "no-cache"})

    @app.get("/playground/heads", include_in_schema=False)
    async def heads() -> JSONResponse:
        return JSONResponse(playground_heads(state, analysis))

"""The service's documentation pages: ``/docs`` (Swagger UI) and ``/redoc``, their scripts
served from the package ``fastapi-offline`` (a dependency of headwise), never from a CDN,
so they work offline. Without that package there are no pages, and ``/openapi.json`` is
the schema."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["DOCS_ASSETS", "add_docs", "docs_assets", "docs_available"]

#: the documentation pages' files, served at /docs/assets/NAME (from fastapi-offline)
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def docs_assets() -> Path | None:
    """The folder holding :data:`DOCS_ASSETS`: the ``static`` folder of the package
    ``fastapi-offline`` (a dependency of headwise), or None when it is not installed."""
    spec = importlib.util.find_spec("fastapi_offline")
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root) / "static"
        if all((folder / name).is_file() for name in DOCS_ASSETS):
            return folder
    return None


def docs_available() -> bool:
    """Whether the service has its ``/docs`` and ``/redoc`` pages (:func:`docs_assets`)."""
    return docs_assets() is not None


def add_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts served from the package
    (:func:`docs_assets`), never from a CDN; none when the files are not installed."""
    folder = docs_assets()
    if folder is None:
        return
    title = f"{app.title} - docs"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '').rstrip('/')}/docs/assets/{name}"

    def schema(request: Request) -> str:
        return f"{request.scope.get('root_path', '').rstrip('/')}{app.openapi_url}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=schema(request), title=title,
                                   swagger_js_url=asset(request, "swagger-ui-bundle.js"),
                                   swagger_css_url=asset(request, "swagger-ui.css"),
                                   swagger_favicon_url=asset(request, "favicon.png"))

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(openapi_url=schema(request), title=title,
                              redoc_js_url=asset(request, "redoc.standalone.js"),
                              redoc_favicon_url=asset(request, "favicon.png"),
                              with_google_fonts=False)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> Response:
        if name not in DOCS_ASSETS:
            raise StarletteHTTPException(404, f"no such file: /docs/assets/{name}")
        return FileResponse(folder / name, headers={"Cache-Control": "max-age=86400"})

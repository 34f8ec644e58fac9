"""The API docs at `/docs` (Swagger UI), served whole by this server: its script, styles and
icon come from the `swagger-ui-bundle-v2` package under `/docs/assets`, never from a CDN, so
the page works on a machine without internet. ReDoc, which FastAPI would load from a CDN
too, is not offered. Like `/openapi.json`, these need no token.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS = "/docs"
ASSETS = f"{DOCS}/assets"
OAUTH2_REDIRECT = f"{DOCS}/oauth2-redirect"


def install_api_docs(app: FastAPI) -> None:
    """`GET /docs`, its assets and Swagger UI's OAuth2 redirect page (make the app with
    `docs_url=None, redoc_url=None`)."""
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get(DOCS, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            oauth2_redirect_url=OAUTH2_REDIRECT,
        )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

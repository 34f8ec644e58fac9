"""What each path allows: the `Allow` header of a 405 and the answer to OPTIONS.

Starlette names only the methods of the first route whose path matches (`POST` for
`/api/v1/jobs`, which also has `GET`); here the app's routes are asked for each method, as
a request would match them (included routers too).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Match, Mount

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
STATIC_METHODS = ("GET", "HEAD")


def _answers(app: FastAPI, path: str, method: str) -> bool:
    scope = {"type": "http", "path": path, "root_path": "", "method": method, "app": app}
    for route in app.router.routes:
        if isinstance(route, Mount):
            continue
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return True
    return False


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods some route of `app` answers at `path`, plus OPTIONS; [] for no route."""
    for route in app.router.routes:
        scope = {"type": "http", "path": path, "root_path": ""}
        if isinstance(route, Mount) and route.matches(scope)[0] != Match.NONE:
            return [*STATIC_METHODS, "OPTIONS"]
    found = [m for m in METHODS if _answers(app, path, m)]
    return [*found, "OPTIONS"] if found else []


def allow_header(app: FastAPI, path: str) -> dict[str, str]:
    methods = allowed_methods(app, path)
    return {"Allow": ", ".join(methods)} if methods else {}

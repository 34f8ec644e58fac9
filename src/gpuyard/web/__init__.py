"""The web portal's templates (Jinja2) and static files (CSS, JS, vendored htmx).

Only data lives here; `gpuyard.api.routers.web` renders the templates with the same
services and authorisation as the REST API. `htmx.min.js` is htmx 2.0.11 from the npm package
`htmx.org` (Zero-Clause BSD).
"""

from pathlib import Path

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
HTMX_VERSION = "2.0.11"

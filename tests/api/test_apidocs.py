"""`/docs` works offline (issue 17, item 6): the Swagger UI page names no external host, and
every script, style and icon it names is served by this server, without a token."""

from __future__ import annotations

import re

URL = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""")


def test_docs_page_references_no_external_host(shared_world) -> None:
    page = shared_world.client.get("/docs")
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text and "//cdn" not in page.text
    urls = URL.findall(page.text)
    assert {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css",
            "/openapi.json"} <= set(urls)
    for url in urls:
        assert url.startswith("/"), url
        answer = shared_world.client.get(url)  # no token: the docs are public
        assert answer.status_code == 200, url
        assert answer.content, url


def test_no_redoc_and_the_oauth2_redirect_is_local(shared_world) -> None:
    assert shared_world.client.get("/redoc").status_code in (404, 405)  # no such page
    redirect = shared_world.client.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200
    assert "https://" not in redirect.text and "http://" not in redirect.text

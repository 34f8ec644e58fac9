"""A job's web service through the platform, on the real server and a real container: the
owner opens it through the API and through the portal (the session cookie), the task never
sees their token or cookie, and another tenant's member (404, as for no job) and a viewer
(403) are refused (docs/services.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from e2e.conftest import Server
from tasknetworks import nodes_under, random_subnets, remove_node_network

pytestmark = [pytest.mark.e2e, pytest.mark.container]

ECHO = (
    "import http.server as h\n"
    "class E(h.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = ('served-from-the-task ' + self.path + '\\n' + str(self.headers)).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "h.HTTPServer(('0.0.0.0', 8000), E).serve_forever()\n"
)
SPEC = """name: web
services: {web: 8000}
taskRoles:
  main:
    cpuNumber: 0.5
    memoryMB: 256
    command: |
      cd /workspace && cat > echo.py <<'EOF'
""" + "".join(f"      {line}\n" for line in ECHO.splitlines()) + """      EOF
      exec python3 echo.py
"""


def make_user(server: Server, name: str, tenant: str, role: str = "member") -> httpx.Client:
    r = server.http.post(
        "/api/v1/users", json={"name": name, "memberships": [{"tenant": tenant, "role": role}]}
    )
    assert r.status_code == 201, r.text
    r = server.http.post(f"/api/v1/users/{name}/tokens", json={"name": "e2e"})
    assert r.status_code == 201, r.text
    return server.as_user(r.json()["token"])


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, dict]]:
    base = tmp_path_factory.mktemp("services")
    subnet, network = random_subnets()  # as tests/e2e/test_exec_e2e.py
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPUYARD_TASK_SUBNET", subnet)
        env.setenv("GPUYARD_TASK_NETWORK", network)
        server = Server(base / "data", base / "server.log")
        server.start()
    try:
        assert server.http.post("/api/v1/tenants", json={"name": "team-b"}).status_code == 201
        users = {
            "alice": make_user(server, "alice", "default"),
            "bob": make_user(server, "bob", "team-b"),
            "vic": make_user(server, "vic", "default", "viewer"),
        }
        r = users["alice"].post(
            "/api/v1/jobs", content=SPEC, headers={"Content-Type": "application/yaml"}
        )
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        server.wait(job_id, {"RUNNING"})
        yield server, job_id, users
    finally:
        server.stop()
        for tag in nodes_under(base):
            remove_node_network(tag)


def open_service(client: httpx.Client, path: str, tries: int = 40) -> httpx.Response:
    """The answer, once the task's server listens (it starts after the task is RUNNING)."""
    for _ in range(tries):
        r = client.get(path)
        if r.status_code != 502:
            return r
        time.sleep(0.25)
    return r


def test_the_owner_opens_the_service_through_the_api_and_the_portal(running):
    server, job_id, users = running
    alice = users["alice"]
    r = open_service(alice, f"/api/v1/jobs/{job_id}/services/web/hello?x=1")
    assert r.status_code == 200, r.text
    assert r.text.startswith("served-from-the-task /hello?x=1")
    token = alice.headers["authorization"].split()[1]
    assert token not in r.text and "authorization" not in r.text.lower()

    with httpx.Client(base_url=server.url, timeout=10) as browser:
        browser.cookies.set("gpuyard_session", token)
        page = browser.get(f"/jobs/{job_id}")
        assert f'href="/jobs/{job_id}/services/web/"' in page.text
        r = browser.get(f"/jobs/{job_id}/services/web/")
    assert r.status_code == 200, r.text
    assert r.text.startswith("served-from-the-task /\n")
    assert token not in r.text and "gpuyard_session" not in r.text
    assert f"x-forwarded-prefix: /jobs/{job_id}/services/web\n" in r.text


def test_another_tenants_member_and_a_viewer_are_refused(running):
    _, job_id, users = running
    r = users["bob"].get(f"/api/v1/jobs/{job_id}/services/web/")
    assert r.status_code == 404 and r.json() == {"detail": f"no job {job_id}"}
    r = users["vic"].get(f"/api/v1/jobs/{job_id}/services/web/")
    assert r.status_code == 403, r.text
    assert "served-from-the-task" not in r.text

"""What each `gpuyard` client command imports (issue 17, item 3): never the server's, the
scheduler's or the simulator's code, Ray or matplotlib; and on the fast path (`submit`,
`jobs`) not even typer, rich, httpx, pydantic, typing, or PyYAML but for `submit --tenant`. Each command runs in a fresh interpreter
against a small HTTP server of this test that answers like the API, and reports
`sys.modules` as it exits. A structural test, not a timing one: docs/benchmarks.md has the
times."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_samples import job

from gpuyard.entry import FULL, route

NEVER = ("ray", "matplotlib", "gpuyard.scheduler", "gpuyard.sim", "gpuyard.controller",
         "gpuyard.api", "gpuyard.store", "gpuyard.server", "gpuyard.upcmd", "gpuyard.simcmd",
         "gpuyard.imagecmd", "gpuyard.recovercmd", "fastapi", "sqlalchemy")
NOT_ON_THE_FAST_PATH = ("typer", "rich", "httpx", "pydantic", "click")

ANSWERS: dict[tuple[str, str], tuple[int, Any]] = {
    ("GET", "/api/v1/jobs"): (200, {"jobs": [job("QUEUED", pendingReason="no free GPUs")]}),
    ("POST", "/api/v1/jobs"): (201, {"id": "j-7f3a", "name": "mnist-train", "state": "QUEUED"}),
    ("GET", "/api/v1/jobs/j-7f3a"): (200, job("SUCCEEDED", reason="Completed")),
    ("POST", "/api/v1/jobs/j-7f3a/cancel"): (200, {"id": "j-7f3a", "state": "STOPPED"}),
    ("POST", "/api/v1/jobs/bulk/cancel"): (200, {"matched": 1, "cancelled": ["j-7f3a"],
                                            "refused": [], "dryRun": False, "more": False}),
    ("POST", "/api/v1/jobs/j-7f3a/resubmit"): (201, {"id": "j-8", "name": "x", "state": "QUEUED"}),
    ("POST", "/api/v1/jobs/j-7f3a/hold"): (200, job("QUEUED", heldBy="admin")),
    ("POST", "/api/v1/jobs/j-7f3a/priority"): (200, job("QUEUED")),
    ("GET", "/api/v1/nodes"): (200, {"nodes": []}),
    ("GET", "/api/v1/queue"): (200, {"cluster": [], "tenants": []}),
    ("GET", "/api/v1/usage"): (200, {"rows": [], "total": {"tenant": "*"}}),
    ("GET", "/api/v1/users/admin/notifications"): (200, {"user": "admin", "notify": "off"}),
    ("GET", "/api/v1/settings/mail"): (200, {"host": None}),
    ("GET", "/api/v1/whoami"): (200, {"name": "admin", "role": "platform-admin", "admin": True,
                                      "memberships": []}),
}

RUN = """
import json, sys
sys.argv = ["gpuyard", *json.loads(sys.argv[1])]
from gpuyard.entry import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
with open({out!r}, "w") as f:
    json.dump({{"code": code, "modules": sorted(sys.modules)}}, f)
"""


class FakeApi(BaseHTTPRequestHandler):
    """Answers from ANSWERS; 404 with a detail otherwise."""

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        status, body = ANSWERS.get((self.command, self.path.split("?")[0]),
                                   (404, {"detail": "Not Found"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def imported_by(args: list[str], url: str, tmp_path: Path) -> set[str]:
    """Run `gpuyard ARGS` in a fresh interpreter; the modules it had imported at exit."""
    out = tmp_path / "modules.json"
    env = {"GPUYARD_URL": url, "GPUYARD_TOKEN": "t", "XDG_CONFIG_HOME": str(tmp_path),
           "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    subprocess.run([sys.executable, "-c", RUN.format(out=str(out)), json.dumps(args)],
                   env=env, check=True, capture_output=True, timeout=60)
    report = json.loads(out.read_text())
    assert report["code"] in (0, None), (args, report["code"])
    return set(report["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "job.yaml"
    path.write_text("name: mnist-train\ntaskRoles:\n  main:\n    command: 'true'\n")
    return str(path)


@pytest.mark.parametrize(("args", "more_allowed"), [
    (["jobs"], ()), (["jobs", "-o", "json"], ()), (["jobs", "--tenant", "vision"], ()),
    (["jobs", "--user", "a", "--name", "t*", "--since", "2h", "--cursor", "c2VxOjE"], ()),
    (["submit", "SPEC"], ()), (["submit", "SPEC", "--tenant", "vision"], ("yaml",)),
])
def test_fast_commands_import_only_the_standard_library(
    args: list[str], more_allowed: tuple[str, ...], api_url: str, spec: str, tmp_path: Path
) -> None:
    args = [spec if a == "SPEC" else a for a in args]
    assert route(args) != FULL
    modules = imported_by(args, api_url, tmp_path)
    assert loaded(modules, NEVER + NOT_ON_THE_FAST_PATH) == []
    others = [m for m in ("yaml", "typing", "gpuyard.cli.full") if m not in more_allowed]
    assert loaded(modules, tuple(others)) == []


@pytest.mark.parametrize("args", [
    ["show", "j-7f3a"], ["cancel", "j-7f3a"], ["nodes"], ["queue"], ["whoami"],
    ["cancel", "--name", "t*", "--yes"], ["resubmit", "j-7f3a", "--set", "a=1"],
    ["hold", "j-7f3a"], ["priority", "j-7f3a", "-3"], ["usage", "--by", "job", "-o", "csv"],
    ["notify"], ["admin", "mail", "show"],
    ["submit", "SPEC", "--wait"], ["--help"], ["admin", "--help"], ["jobs", "--help"],
])
def test_client_commands_import_no_server_scheduler_or_simulator_code(
    args: list[str], api_url: str, spec: str, tmp_path: Path
) -> None:
    args = [spec if a == "SPEC" else a for a in args]
    assert loaded(imported_by(args, api_url, tmp_path), NEVER) == []


@pytest.mark.parametrize(("argv", "module"), [
    (["jobs"], "gpuyard.cli.fastjobs"),
    (["--url", "http://h:1", "jobs", "-o", "json"], "gpuyard.cli.fastjobs"),
    (["--url=http://h:1", "submit", "f.yaml"], "gpuyard.cli.fastsubmit"),
    (["submit", "f.yaml", "--tenant", "vision"], "gpuyard.cli.fasttenant"),
    (["submit", "--tenant=vision", "f.yaml"], "gpuyard.cli.fasttenant"),
    (["jobs", "--tenant", "vision"], "gpuyard.cli.fastjobs"),
    (["submit", "f.yaml", "--tenant", "vision", "--wait"], FULL),
    (["submit", "f.yaml", "--wait"], FULL),
    (["submit", "--help"], FULL),
    (["-h"], FULL),
    ([], FULL),
    (["show", "j-1"], FULL),
    (["up", "--port", "1"], FULL),
    (["--verbose", "jobs"], FULL),
])
def test_route(argv: list[str], module: str) -> None:
    assert route(argv) == module

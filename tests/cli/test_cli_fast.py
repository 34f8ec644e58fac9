"""The fast path (`gpuyard.cli.fastjobs`, `gpuyard.cli.fastsubmit`): the same words and exit
codes as the full command line's, a plain `jobs` table, `submit --tenant`."""

from __future__ import annotations

import json

import pytest
from cli_samples import NOW, closed_port, job

from gpuyard.cli import fastjobs, fastsubmit
from gpuyard.cli.basics import EXIT_UNREACHABLE, EXIT_USAGE, ApiError, submit_error_message
from gpuyard.cli.plaintable import jobs_table, spec_errors_text
from gpuyard.cli.tenantflag import with_tenant


def test_jobs_table_columns_and_notes() -> None:
    rows = [job("QUEUED", pendingReason="no free GPUs"),
            job("FAILED", id="j-2", reason="OOMKilled", opportunistic=True)]
    lines = jobs_table(rows, now=NOW).splitlines()
    assert lines[0].split() == ["ID", "NAME", "TENANT", "STATE", "GPUS", "ATTEMPT", "SUBMITTED",
                                "REASON/PENDING"]
    assert lines[1].split()[:4] == ["j-7f3a", "mnist-train", "vision", "QUEUED"]
    assert lines[1].endswith("3m ago     no free GPUs")
    assert "FAILED OPP" in lines[2] and lines[2].endswith("OOMKilled")
    assert lines[3].startswith("OPP: opportunistic")
    assert jobs_table([]) == "no jobs\n"
    assert "\x1b[" not in jobs_table(rows) and "\x1b[1;31m" in jobs_table(rows, color=True)


def test_spec_errors_text() -> None:
    text = spec_errors_text("the job spec has 1 error", [{"path": "taskRoles.w.gpuNumber",
                                                          "message": "must be ≥ 0"}])
    assert text == "spec rejected: the job spec has 1 error\n  • taskRoles.w.gpuNumber: must be ≥ 0\n"


@pytest.mark.parametrize("args", [["jobs"], ["jobs", "-o", "json"], ["submit", __file__]])
def test_refused_connection_is_explained(args, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    url = f"http://127.0.0.1:{closed_port()}"
    main = fastjobs.main if args[0] == "jobs" else fastsubmit.main
    assert main(["--url", url, *args]) == EXIT_UNREACHABLE
    captured = capsys.readouterr()
    assert captured.err.strip() == (f"cannot reach gpuyard at {url}: is the server running? "
                                    "start it with `make run` or `gpuyard up`")
    assert captured.out == ""


def test_usage_errors_exit_2(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exc:
        fastsubmit.main(["submit", str(tmp_path / "nope.yaml")])
    assert exc.value.code == EXIT_USAGE
    with pytest.raises(SystemExit) as exc:
        fastjobs.main(["jobs", "--state", "DONE"])
    assert exc.value.code == EXIT_USAGE
    assert "'DONE' is not one of" in capsys.readouterr().err


def test_with_tenant_ours_and_openpai() -> None:
    assert json.loads(with_tenant(b"name: x\ntaskRoles: {}\n", "vision")) == {
        "name": "x", "taskRoles": {}, "tenant": "vision"}
    assert json.loads(with_tenant(b"name: x\ntenant: vision\n", "vision"))["tenant"] == "vision"
    pai = json.loads(with_tenant(b"protocolVersion: 2\nname: x\n", "nlp"))
    assert pai["defaults"] == {"virtualCluster": "nlp"}
    with pytest.raises(ValueError, match="names tenant 'nlp', --tenant says 'vision'"):
        with_tenant(b"name: x\ntenant: nlp\n", "vision")
    with pytest.raises(ValueError, match="not a mapping"):
        with_tenant(b"- a\n", "vision")


def test_a_refused_submit_says_how_to_name_a_tenant() -> None:
    refused = ApiError(403, "alice is not a member of tenant default and may not submit jobs to it")
    message = submit_error_message(refused, tenant_given=False)
    assert message.startswith("error: alice is not a member of tenant default")
    assert "--tenant NAME" in message and "tenant: NAME" in message
    assert "--tenant" not in submit_error_message(refused, tenant_given=True)
    assert "--tenant" not in submit_error_message(ApiError(500, "boom"), tenant_given=False)

"""`gpuyard sim` (its typer app, which the CLI dispatches to) end to end on a small generated
CSV trace: the side-by-side table, the files it writes, the `default` flags it passes on,
seeds in parallel, and a clear error (exit 2) for a bad trace."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyard.sim.command import sim_config
from gpuyard.simcmd import sim_app

runner = CliRunner()


def write_trace(path: Path, n: int = 60) -> Path:
    rng = random.Random(5)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submit_time", "duration", "num_gpus", "tenant", "gpu_type"])
        t = 0.0
        for _ in range(n):
            t += rng.expovariate(1 / 120)
            w.writerow([round(t, 1), round(rng.uniform(60, 7200), 1),
                        rng.choice([1, 2, 4, 8]), rng.choice(["vision", "nlp"]), "V100"])
    return path


def test_sim_prints_the_policies_side_by_side_and_writes_the_outputs(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "jobs.csv")
    out = tmp_path / "out"
    result = runner.invoke(
        sim_app,
        ["--trace", f"csv:{trace}", "--quotas", "demand:0.7",
         "--policy", "fifo,default", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "fifo" in result.output and "default" in result.output
    assert "avg JCT" in result.output
    assert (out / "summary.csv").exists() and (out / "tenants.csv").exists()
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["policy"] for r in rows] == ["fifo-quota", "default"]  # fifo: its old name


def test_sim_with_seeds_prints_mean_and_deviation_and_writes_every_run(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "jobs.csv")
    out = tmp_path / "out"
    result = runner.invoke(
        sim_app,
        ["--trace", f"csv:{trace}", "--quotas", "demand:2", "--policy", "fifo-quota,las",
         "--seeds", "0-2",
         "--jobs", "2", "--jitter", "60", "--one-tenant", "--checkpoint", "0", "--out", str(out)],
        env={"COLUMNS": "200"},  # no wrapped cells
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "1 tenants" in said and "jitter 60 s" in said and "seeds [0, 1, 2]" in said
    assert "±" in said and "fifo-private ÷ this" in said and "in every seed" in said
    with (out / "seeds.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["policy"], r["seed"]) for r in rows] == [
        (p, s) for p in ("fifo-private", "fifo-quota", "las") for s in "012"
    ]
    assert len({r["avg_jct_s"] for r in rows if r["policy"] == "las"}) == 3  # the jitter


def test_sim_config_passes_the_default_policy_flags() -> None:
    config = sim_config(60.0, 1800.0, 30, 0, "fifo", False, False, False)
    assert (config.tenant_backfill, config.tenant_preemption) == (False, False)
    assert config.least_served_first is False
    assert config.tenant_queue.value == "fifo"
    assert sim_config(60.0, 1800.0, 30, 0, "las").tenant_backfill is True  # as SchedulerConfig
    assert sim_config(60.0, 1800.0, 30, 0, "fifo", jitter_s=60).jitter_s == 60


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("submit_time,duration\n1,2\n", "expected submit_time,duration,num_gpus"),
        ("submit_time,duration,num_gpus,tenant,gpu_type\n1,x,1,a,V100\n", "line 2"),
    ],
)
def test_a_bad_trace_is_a_clear_error(tmp_path: Path, content: str, expected: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    result = runner.invoke(sim_app, ["--trace", f"csv:{bad}", "--policy", "fifo"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # rich wraps long lines
    assert said.startswith("error:") and expected in said
    assert "Traceback" not in said


def test_openb_seeds_stay_a_count() -> None:
    result = runner.invoke(sim_app, ["--trace", "openb", "--seeds", "0-4"])
    assert result.exit_code == 2
    assert "how many seeds" in " ".join(result.output.split())

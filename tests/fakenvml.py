"""Building the fake NVML library (tests/fakes/fake_nvml.c, docs/gpus.md) as libnvidia-ml.so.1,
for the tests (tests/gpus/conftest.py) and the benches that load it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FAKE_NVML_SOURCE = Path(__file__).resolve().parent / "fakes" / "fake_nvml.c"


def build_fake_nvml(out: Path) -> Path:
    """`out/libnvidia-ml.so.1` built from the fake's source; `out`. RuntimeError without gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc not found: cannot build the fake NVML (tests/fakes/fake_nvml.c)")
    out.mkdir(parents=True, exist_ok=True)
    cmd = [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra",
           "-o", str(out / "libnvidia-ml.so.1"), str(FAKE_NVML_SOURCE)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"building the fake NVML failed:\n{result.stderr}")
    return out

"""Builds the fake NVML library (tests/fakes/fake_nvml.c) and runs Python against it.

pynvml dlopens `libnvidia-ml.so.1`, and the dynamic loader reads LD_LIBRARY_PATH when a
process starts, so code that must see the fake library runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fakenvml import build_fake_nvml

ENV_TO_CLEAR = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "FAKE_NVML_GPUS",
    "FAKE_NVML_FAIL",
    "FAKE_NVML_NVLINK",
    "FAKE_NVML_PCIE",
)

RunPython = Callable[..., tuple[Any, str]]


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the fake NVML built as libnvidia-ml.so.1."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found: cannot build the fake NVML library (tests/fakes/fake_nvml.c)")
    return build_fake_nvml(tmp_path_factory.mktemp("fake_nvml"))


def run_python(code: str, **env: str) -> tuple[Any, str]:
    """Run `code` in a fresh interpreter with `env` added; its stdout as JSON, and its stderr."""
    full_env = {k: v for k, v in os.environ.items() if k not in ENV_TO_CLEAR} | env
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"subprocess failed:\n{result.stderr}"
    return json.loads(result.stdout), result.stderr


@pytest.fixture
def with_fake_nvml(fake_nvml_dir: Path) -> RunPython:
    """run_python with LD_LIBRARY_PATH pointing at the fake NVML."""

    def run(code: str, **env: str) -> tuple[Any, str]:
        return run_python(code, LD_LIBRARY_PATH=str(fake_nvml_dir), **env)

    return run


@pytest.fixture
def without_nvml() -> RunPython:
    """run_python with no LD_LIBRARY_PATH, so only a system NVML could be found."""
    return run_python

"""GPU health through the real pynvml against the fake NVML: XID events, ECC, retired pages
and a GPU fallen off the bus turn a GPU unhealthy, with the cause; the verdict is sticky."""

from __future__ import annotations

from pathlib import Path

import pytest

UUIDS = [f"GPU-{i}{i}{i}{i}0000-0000-0000-0000-000000000000" for i in range(4)]
FOUR = ";".join(f"NVIDIA A100-SXM4-80GB|{u}|81920" for u in UUIDS)

# Each line of `steps` is appended to the health file before one check; the script prints,
# after each check, every GPU's (healthy, cause).
CHECKS = """
import json, sys
from gpuyard.runtime.gpus import discover_nvml_gpus
from gpuyard.runtime.gpuhealth import NvmlHealth
gpus = discover_nvml_gpus()
health = NvmlHealth(interval_s=0)
out = []
for line in sys.argv[1:]:
    with open(HEALTH, "a") as f:
        f.write(line + "\\n" if line else "")
    out.append([[g.healthy, g.health_cause] for g in health.check(gpus)])
health.close()
print(json.dumps(out))
"""

HEALTHY = [True, None]


@pytest.mark.parametrize(
    ("fault", "gpu", "cause"),
    [
        ("2 xid 79", 2, "XID 79"),
        ("1 ecc 3", 1, "ECC: 3 uncorrectable errors"),
        ("0 pending", 0, "retired pages pending (the GPU needs a reset)"),
        ("3 lost", 3, "lost (fallen off the bus)"),
    ],
)
def test_a_fault_marks_one_gpu_unhealthy_and_it_stays_so(
    with_fake_nvml, tmp_path: Path, fault: str, gpu: int, cause: str
):
    health_file = tmp_path / "health"
    health_file.write_text("")
    code = CHECKS.replace("HEALTH", repr(str(health_file)))
    out, _ = with_fake_nvml(
        f"import sys; sys.argv = ['x', '', {fault!r}, '']\n{code}",
        FAKE_NVML_GPUS=FOUR,
        FAKE_NVML_HEALTH_FILE=str(health_file),
    )
    before, after, later = out
    assert before == [HEALTHY] * 4
    expected = [HEALTHY] * 4
    expected[gpu] = [False, cause]
    assert after == expected
    assert later == expected  # sticky, also once an XID event was consumed


def test_application_xids_do_not_count_against_the_gpu(with_fake_nvml, tmp_path: Path):
    health_file = tmp_path / "health"
    health_file.write_text("")
    code = CHECKS.replace("HEALTH", repr(str(health_file)))
    out, _ = with_fake_nvml(
        f"import sys; sys.argv = ['x', '0 xid 13', '0 xid 43', '1 xid 48']\n{code}",
        FAKE_NVML_GPUS=FOUR,
        FAKE_NVML_HEALTH_FILE=str(health_file),
    )
    assert out[1] == [HEALTHY] * 4
    assert out[2][0] == HEALTHY and out[2][1] == [False, "XID 48"]

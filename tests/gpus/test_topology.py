"""Topology groups of NVML GPUs: NVLink islands and PCIe switches, through the fake NVML."""

from __future__ import annotations

from types import SimpleNamespace

import pynvml
import pytest

from gpuyard.runtime import gpus as gpus_module

GROUPS = (
    "import json\n"
    "from gpuyard.runtime.gpus import discover_nvml_gpus\n"
    "print(json.dumps([[g.index, g.topology_group] for g in discover_nvml_gpus()]))\n"
)
RAW_QUERIES = (
    "import json, pynvml as p\n"
    "p.nvmlInit()\n"
    "h = [p.nvmlDeviceGetHandleByIndex(i) for i in range(4)]\n"
    "out = [[p.nvmlDeviceGetTopologyCommonAncestor(h[a], h[b]),\n"
    "        p.nvmlDeviceGetP2PStatus(h[a], h[b], p.NVML_P2P_CAPS_INDEX_NVLINK),\n"
    "        p.nvmlDeviceGetP2PStatus(h[a], h[b], p.NVML_P2P_CAPS_INDEX_WRITE)]\n"
    "       for a, b in [(0, 1), (0, 2), (2, 3), (1, 1)]]\n"
    "try:\n"
    "    p.nvmlDeviceGetP2PStatus(h[0], h[1], p.NVML_P2P_CAPS_INDEX_UNKNOWN)\n"
    "except p.NVMLError_InvalidArgument:\n"
    "    out.append('invalid')\n"
    "p.nvmlShutdown()\n"
    "print(json.dumps(out))\n"
)


def gpu_spec(count: int) -> str:
    return ";".join(f"NVIDIA A100-SXM4-80GB|GPU-{i:04d}|81920" for i in range(count))


@pytest.mark.parametrize(
    ("count", "env", "groups"),
    [
        pytest.param(
            8, {"FAKE_NVML_NVLINK": "0,1,2,3;4,5,6,7"}, [0, 0, 0, 0, 1, 1, 1, 1], id="nvlink-2x4"
        ),
        pytest.param(8, {"FAKE_NVML_NVLINK": "0,1,2,3,4,5,6,7"}, [0] * 8, id="nvswitch-8"),
        pytest.param(4, {"FAKE_NVML_NVLINK": "3,2;1,0"}, [0, 0, 1, 1], id="nvlink-unsorted"),
        pytest.param(4, {"FAKE_NVML_NVLINK": "1,3"}, [0, 1, 2, 1], id="numbered-by-lowest-index"),
        pytest.param(4, {"FAKE_NVML_PCIE": "0,1;2,3"}, [0, 0, 1, 1], id="pcie-pairs"),
        pytest.param(4, {"FAKE_NVML_PCIE": "0,2"}, [0, 1, 0, 2], id="pcie-one-pair"),
        pytest.param(
            4,
            {"FAKE_NVML_NVLINK": "0,1", "FAKE_NVML_PCIE": "1,2"},
            [0, 0, 0, 1],
            id="nvlink-then-pcie",
        ),
        pytest.param(
            6,
            {"FAKE_NVML_NVLINK": "4,5", "FAKE_NVML_PCIE": "0,1;2,3"},
            [0, 0, 1, 1, 2, 2],
            id="mixed",
        ),
        pytest.param(4, {}, [0, 1, 2, 3], id="no-links"),
        pytest.param(1, {}, [0], id="single-gpu"),
        pytest.param(0, {}, [], id="no-gpus"),
        pytest.param(
            4,
            {"FAKE_NVML_NVLINK": "0,1;2,3", "FAKE_NVML_FAIL": "topology_not_supported"},
            [None] * 4,
            id="topology-not-supported",
        ),
    ],
)
def test_topology_groups(with_fake_nvml, count, env, groups):
    result, stderr = with_fake_nvml(GROUPS, FAKE_NVML_GPUS=gpu_spec(count), **env)
    assert result == [[index, group] for index, group in enumerate(groups)]
    assert "Traceback" not in stderr


def test_a_lost_gpu_is_left_out_of_the_islands(with_fake_nvml):
    result, _ = with_fake_nvml(
        GROUPS,
        FAKE_NVML_GPUS=gpu_spec(4),
        FAKE_NVML_NVLINK="0,1;2,3",
        FAKE_NVML_FAIL="gpu_is_lost:0",
    )
    assert result == [[1, 0], [2, 1], [3, 1]]


@pytest.mark.parametrize("nvlink", ["0,4", "0,1;1,2", "0,,1", "a,b"])
def test_a_malformed_topology_makes_the_fake_fail_to_initialise(with_fake_nvml, nvlink):
    result, stderr = with_fake_nvml(GROUPS, FAKE_NVML_GPUS=gpu_spec(4), FAKE_NVML_NVLINK=nvlink)
    assert result == []
    assert "bad FAKE_NVML_NVLINK" in stderr


def test_fake_library_answers_topology_queries(with_fake_nvml):
    result, _ = with_fake_nvml(
        RAW_QUERIES, FAKE_NVML_GPUS=gpu_spec(4), FAKE_NVML_NVLINK="2,3", FAKE_NVML_PCIE="0,1"
    )
    ok, unsupported = pynvml.NVML_P2P_STATUS_OK, pynvml.NVML_P2P_STATUS_NOT_SUPPORTED
    assert result == [
        [pynvml.NVML_TOPOLOGY_SINGLE, unsupported, ok],
        [pynvml.NVML_TOPOLOGY_SYSTEM, unsupported, unsupported],
        [pynvml.NVML_TOPOLOGY_SYSTEM, ok, ok],
        [pynvml.NVML_TOPOLOGY_INTERNAL, unsupported, ok],
        "invalid",
    ]


def nvml_error(code: int):
    def fail(*args):
        raise pynvml.NVMLError(code)

    return fail


@pytest.mark.parametrize(
    ("failing", "code"),
    [
        ("nvmlDeviceGetP2PStatus", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
        ("nvmlDeviceGetP2PStatus", pynvml.NVML_ERROR_NOT_SUPPORTED),
        ("nvmlDeviceGetTopologyCommonAncestor", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
        ("nvmlDeviceGetTopologyCommonAncestor", pynvml.NVML_ERROR_UNKNOWN),
    ],
)
def test_no_groups_when_nvml_cannot_tell(monkeypatch, failing, code):
    """Older drivers lack the functions; VMs often answer NOT_SUPPORTED. Discovery goes on."""
    fakes = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda index: f"handle{index}",
        "nvmlDeviceGetName": lambda handle: "NVIDIA L4",
        "nvmlDeviceGetUUID": lambda handle: f"GPU-{handle}",
        "nvmlDeviceGetMemoryInfo": lambda handle: SimpleNamespace(total=23034 * 1024 * 1024),
        "nvmlDeviceGetMinorNumber": lambda handle: 0,
        "nvmlDeviceGetP2PStatus": lambda *args: pynvml.NVML_P2P_STATUS_NOT_SUPPORTED,
        "nvmlDeviceGetTopologyCommonAncestor": lambda *args: pynvml.NVML_TOPOLOGY_SYSTEM,
    }
    fakes[failing] = nvml_error(code)
    for name, fake in fakes.items():
        monkeypatch.setattr(pynvml, name, fake)
    gpus = gpus_module.discover_nvml_gpus()
    assert [(g.uuid, g.topology_group) for g in gpus] == [
        ("GPU-handle0", None),
        ("GPU-handle1", None),
    ]

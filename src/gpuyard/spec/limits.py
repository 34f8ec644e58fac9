"""Limits of a job spec, in one place: the validator, the docs and the tests read them here."""

from __future__ import annotations

import re

MAX_SPEC_BYTES = 1024 * 1024  # a spec document larger than this is refused unread

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
NAME_RULE = "1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit"
TENANT_RE = NAME_RE
ROLE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
ROLE_RULE = "1 to 32 letters, digits or '_', starting with a letter"
ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_RESERVED_PREFIXES = ("GPUYARD_", "PAI_")
ENV_RESERVED_NAMES = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
ENV_DISTRIBUTED_NAMES = (  # set for every task of a job (docs/nodes.md)
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
)
GPU_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
GPU_TYPE_RULE = "1 to 64 letters, digits, '_', '.' or '-', like A100 or A100-80GB"

MAX_IMAGE_CHARS = 512
MAX_PATH_BYTES = 4096  # a host path, UTF-8 (Linux's PATH_MAX)
MAX_NAME_BYTES = 255  # one component of a host path, UTF-8 (Linux's NAME_MAX)
MAX_ENV_VARS = 512
MAX_ENV_VALUE_CHARS = 32 * 1024
MAX_COMMAND_CHARS = 64 * 1024
MAX_URL_CHARS = 2048
MAX_NUMBER_DIGITS = 4000  # a longer integer is refused unread (Python's int-text limit: 4300)
WEBHOOK_SCHEMES = ("http", "https")

RETRY_COUNT = (0, 100)
PRIORITY = (-1000, 1000)
TASK_NUMBER = (1, 1000)
CPU_NUMBER = (0.001, 1024.0)
MEMORY_MB = (16, 4 * 1024 * 1024)
GPU_NUMBER = (0, 64)
GPU_FRACTION_STEP = 0.001  # a fractional gpuNumber is rounded to thousandths
GPU_MEMORY_MB = (16, 1024 * 1024)  # gpuMemoryMB: a share of one GPU, at most 1 TiB
GPU_COMPUTE_PERCENT = (1, 100)  # gpuComputePercent: MPS active thread percentage
MAX_RUNTIME_S = (1, 30 * 24 * 3600)
MAX_ROLES = 32
MAX_TASKS = 1000  # all roles together

DEFAULT_TENANT = "default"
DEFAULT_TASK_NUMBER = 1
DEFAULT_CPU_NUMBER = 1.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_GPU_NUMBER = 0

"""How one task runs on one node: OCI containers through crun or runc (`ContainerRuntime`).

See docs/runtime.md. The task's supervisor is `python -m gpuyard.runtime.supervisor`.
"""

from gpuyard.runtime.errors import (
    ContainerRuntimeError,
    ImageError,
    RuntimeStartError,
    RuntimeUnavailable,
    TaskStillRunning,
)
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskExit, TaskLaunch, TaskPhase, TaskStatus

__all__ = [
    "ContainerRuntime",
    "ContainerRuntimeError",
    "ImageError",
    "RuntimeStartError",
    "RuntimeUnavailable",
    "TaskExit",
    "TaskLaunch",
    "TaskPhase",
    "TaskStatus",
    "TaskStillRunning",
]

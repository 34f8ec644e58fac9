"""Errors of the container runtime layer, each with a message meant for a person."""

from __future__ import annotations


class ContainerRuntimeError(RuntimeError):
    """Base of the errors below."""


class RuntimeUnavailable(ContainerRuntimeError):
    """No OCI runtime (crun or runc) can run containers on this host."""


class RuntimeStartError(ContainerRuntimeError):
    """A task could not even be handed to its supervisor (bad launch, cannot spawn)."""


class LaunchInvalid(RuntimeStartError):
    """The launch itself cannot run as given (bad env, missing data dir, bad limits): starting
    it again would fail the same way, so it is never retried."""


class ImageError(RuntimeStartError):
    """The task's image cannot be had on this node (missing, not pullable, unsupported)."""


class TaskStillRunning(ContainerRuntimeError):
    """The task's state dir cannot be removed: its supervisor is alive and has not exited."""

"""The controller loop: store → snapshot → scheduler → bind → engine; lifecycle and retries."""

from gpuyard.controller.logs import LogUnavailable
from gpuyard.controller.loop import Controller

__all__ = ["Controller", "LogUnavailable"]

"""Warnings about a job spec: fields accepted but not (yet) honoured as their source means them.

An OpenPAI field that gpuyard cannot honour is never dropped silently: it is refused (a
`FieldError`, 422) or accepted with a `FieldWarning` naming its path. The API records each
warning as a `SpecWarning` event on the job, so `gpuyard show` and the portal list it.
"""

from __future__ import annotations

from dataclasses import dataclass

EVENT_REASON = "SpecWarning"  # the reason of the job event that records a warning


@dataclass(frozen=True, slots=True)
class FieldWarning:
    """A field accepted but not honoured (or honoured differently), and what happens instead."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class Warnings:
    """Collects `FieldWarning`s in the order found, each once."""

    def __init__(self) -> None:
        self.items: list[FieldWarning] = []

    def add(self, path: str, message: str) -> None:
        warning = FieldWarning(path, message)
        if warning not in self.items:
            self.items.append(warning)

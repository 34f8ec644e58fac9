"""`TaskLaunch` back from the JSON of `launch.json` (written by `dataclasses.asdict`).

A task that waits for its image is launched later, possibly by another server process, from
its `launch.json` alone. The conversion follows `TaskLaunch`'s type hints (tuples, nested
dataclasses such as `GpuDevice` and `TaskPeer`, enums, optionals), so a field added to the
launch needs nothing here; a key the class no longer has is ignored, a missing one takes the
field's default.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from gpuyard.runtime.types import TaskLaunch


def launch_from_json(value: Any) -> TaskLaunch:
    """The launch `value` (a dict) holds; ValueError if it is not one."""
    if not isinstance(value, dict):
        raise ValueError("launch.json does not hold a launch")
    try:
        launch = _build(TaskLaunch, value)
    except (KeyError, TypeError) as e:
        raise ValueError(f"launch.json does not hold a launch: {e}") from e
    assert isinstance(launch, TaskLaunch)
    return launch


def _build(cls: type, value: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError(f"{cls.__name__} needs an object, got {type(value).__name__}")
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls) if f.name in value]
    return cls(**{name: _convert(hints[name], value[name]) for name in fields})


def _convert(hint: Any, value: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        kinds = [a for a in args if a is not type(None)]
        return _convert(kinds[0], value) if len(kinds) == 1 else value
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v) for v in value)
        return tuple(_convert(a, v) for a, v in zip(args, value, strict=True))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    return value

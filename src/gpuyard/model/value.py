"""The base of the model's frozen value types: they pickle by their init fields.

A frozen, slotted dataclass pickles through `object.__setattr__` in its generated
`__setstate__`; once mypyc compiles it (`make compiled`: the scheduler's replays) that path
raises `FrozenInstanceError`. Pickling by constructor arguments works either way, and Ray
and process pools pickle these types (a node's inventory, a simulator's jobs).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


class Value:
    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        me: Any = self  # a dataclass: every subclass is one
        return (type(self), tuple(getattr(self, f.name) for f in fields(me) if f.init))

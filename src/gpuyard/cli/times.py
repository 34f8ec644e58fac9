"""Times of API answers for people (`3m ago`, `2026-11-22 01:02:03`), standard library only:
the fast path (`gpuyard.cli.fast`) and the rich renderers (`gpuyard.cli.render`) share them."""

from __future__ import annotations

from datetime import UTC, datetime

NONE = "-"


def parse_time(value: str | None) -> datetime | None:
    """An API time (`2026-11-22T01:02:03.456Z`) as an aware datetime; None if absent/bad."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def relative_time(value: str | None, now: datetime | None = None) -> str:
    """`3m ago`, `2h ago`, `just now`; "-" when there is no time."""
    when = parse_time(value)
    if when is None:
        return NONE if not value else str(value)
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    if seconds < 0:
        return "just now" if seconds > -60 else f"in {_span(-seconds)}"
    if seconds < 5:
        return "just now"
    return f"{_span(seconds)} ago"


def _span(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def absolute_time(value: str | None) -> str:
    """`2026-11-22 01:02:03` (UTC); "-" when there is no time."""
    when = parse_time(value)
    if when is None:
        return NONE if not value else str(value)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")

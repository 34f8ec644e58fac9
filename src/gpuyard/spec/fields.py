"""Readers for single fields: each checks one value, records a readable error, returns it clean.

A reader is `read(errs, path, value) -> value | None`; it returns None after recording an
error, and the caller raises once every field has been read (`Errors.raise_if_any`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gpuyard.model import PriorityClass
from gpuyard.spec import limits
from gpuyard.spec.errors import Errors, HugeNumber, got, got_text, item, join, show
from gpuyard.spec.models import SECRET_KEY, Secret

Reader = Callable[[Errors, str, object], Any]

_INT_TEXT = re.compile(r"\s*[+-]?\d{1,18}\s*")
_NUM_TEXT = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_SIZE_TEXT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([MGT]?)(i?B?)\s*", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
_DURATION_TEXT = re.compile(r"(?:(\d{1,12})d)?(?:(\d{1,12})h)?(?:(\d{1,12})m)?(?:(\d{1,12})s)?")
_DURATION_UNITS = (86400, 3600, 60, 1)


def as_whole(value: object) -> int | None:
    """An int from 3, 3.0 or '3'; None for anything else (true/false included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    return None


def as_number(value: object) -> float | None:
    """A finite float from 0.5, 2 or '0.5'; None for anything else."""
    if isinstance(value, bool):
        return None
    numeric = isinstance(value, int | float)
    if not numeric and not (isinstance(value, str) and _NUM_TEXT.fullmatch(value)):
        return None
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None


def whole(lo: int, hi: int, words: str | None = None) -> Reader:
    """A whole number in [lo, hi]; `words` replaces the default 'a whole number ≥ lo'."""
    expected = words or f"a whole number ≥ {lo}"

    def read(errs: Errors, path: str, value: object) -> int | None:
        number = as_whole(value)
        if number is None or number < lo:
            errs.add(path, f"must be {expected}{got(value)}")
            return None
        if number > hi:
            errs.add(path, f"must be {words or f'at most {hi}'}{got(value)}")
            return None
        return number

    return read


def read_flag(errs: Errors, path: str, value: object) -> bool | None:
    """true or false, nothing else (no 0/1, no 'yes')."""
    if isinstance(value, bool):
        return value
    errs.add(path, f"must be true or false{got(value)}")
    return None


def read_priority_class(errs: Errors, path: str, value: object) -> PriorityClass | None:
    """prod, normal or opportunistic (docs/spec.md)."""
    names = [c.value for c in PriorityClass]
    if isinstance(value, str) and value in names:
        return PriorityClass(value)
    errs.add(path, f"must be one of {', '.join(names)}{got(value)}")
    return None


def read_cpu(errs: Errors, path: str, value: object) -> float | None:
    """CPU cores: a number > 0 (fractions allowed, down to one millicore)."""
    lo, hi = limits.CPU_NUMBER
    number = as_number(value)
    if number is None or number <= 0:
        errs.add(path, f"must be a number of CPU cores > 0, like 2 or 0.5{got(value)}")
        return None
    if number < lo:
        errs.add(path, f"must be at least {lo} (one millicore){got(value)}")
        return None
    if number > hi:
        errs.add(path, f"must be at most {hi:g}{got(value)}")
        return None
    return round(number, 3)


def read_gpu_number(errs: Errors, path: str, value: object) -> int | float | None:
    """Whole GPUs (0–64, an int), or a fraction of ONE shared GPU's memory in (0, 1), rounded
    to thousandths (a float). 1.0 is one whole GPU; 1.5 is refused."""
    lo, hi = limits.GPU_NUMBER
    number = as_number(value)
    if number is None or number < lo:
        errs.add(path, f"must be a whole number ≥ 0, or a fraction of one GPU like 0.5{got(value)}")
        return None
    if number.is_integer():
        if number > hi:
            errs.add(path, f"must be at most {hi}{got(value)}")
            return None
        return int(number)
    if number > 1:
        errs.add(
            path,
            "must be a whole number of GPUs, or a fraction of one shared GPU between 0 and 1"
            f" (like 0.5); a task cannot take part of several GPUs{got(value)}",
        )
        return None
    step = limits.GPU_FRACTION_STEP
    if number < step:
        errs.add(path, f"must be at least {step} (a thousandth of a GPU){got(value)}")
        return None
    return round(number, 3)


def read_gpu_memory(errs: Errors, path: str, value: object) -> int | None:
    """MB of one shared GPU's memory: 20000, '20G', '512M'."""
    lo, hi = limits.GPU_MEMORY_MB
    number = as_megabytes(value)
    if number is None or number < lo:
        expected = f"a whole number of MB ≥ {lo} of one GPU's memory, or a size like 20G"
        errs.add(path, f"must be {expected}{got(value)}")
        return None
    if number > hi:
        errs.add(path, f"must be at most {hi} MB{got(value)}")
        return None
    return number


def as_megabytes(value: object) -> int | None:
    """MB from 4096, '4096', '512M', '4G', '4Gi', '1.5GB' (binary units: 1G = 1024 MB)."""
    number = as_whole(value)
    if number is not None:
        return number
    if not isinstance(value, str):
        return None
    match = _SIZE_TEXT.fullmatch(value)
    if match is None or (match.group(3) and not match.group(2)):
        return None
    megabytes = float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    return int(megabytes) if megabytes.is_integer() else None


def read_memory(errs: Errors, path: str, value: object) -> int | None:
    lo, hi = limits.MEMORY_MB
    number = as_megabytes(value)
    if number is None or number < lo:
        expected = f"a whole number of MB ≥ {lo}, or a size like 512M or 4G"
        errs.add(path, f"must be {expected}{got(value)}")
        return None
    if number > hi:
        errs.add(path, f"must be at most {hi} MB (4T){got(value)}")
        return None
    return number


def as_seconds(value: object) -> int | None:
    """Seconds from 90, '90', '90s', '30m', '2h', '1h30m', '1d'."""
    number = as_whole(value)
    if number is not None:
        return number
    if not isinstance(value, str):
        return None
    text = value.strip().lower().replace(" ", "")
    match = _DURATION_TEXT.fullmatch(text)
    if not text or match is None:
        return None
    return sum(int(g or 0) * unit for g, unit in zip(match.groups(), _DURATION_UNITS, strict=True))


def read_duration(errs: Errors, path: str, value: object) -> int | None:
    lo, hi = limits.MAX_RUNTIME_S
    seconds = as_seconds(value)
    if seconds is None or seconds < lo:
        expected = "a duration like 90s, 30m, 2h, 1h30m or 1d, or whole seconds ≥ 1"
        errs.add(path, f"must be {expected}{got(value)}")
        return None
    if seconds > hi:
        errs.add(path, f"must be at most 30d ({hi} seconds){got(value)}")
        return None
    return seconds


def pattern(regex: re.Pattern[str], rule: str) -> Reader:
    """A string that matches `regex` in full; `rule` says what that means in words."""

    def read(errs: Errors, path: str, value: object) -> str | None:
        if not isinstance(value, str) or not regex.fullmatch(value):
            errs.add(path, f"must be {rule}{got_text(value)}")
            return None
        return value

    return read


def read_image(errs: Errors, path: str, value: object) -> str | None:
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= limits.MAX_IMAGE_CHARS
        and not any(c.isspace() or not c.isprintable() for c in value)
    )
    if not ok:
        expected = "an image reference without spaces, like python:3.11-slim"
        errs.add(path, f"must be {expected}{got_text(value)}")
        return None
    return value  # type: ignore[return-value]


def read_host_path(errs: Errors, path: str, value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/"):
        errs.add(
            path, f"must be an absolute path on the host, like /srv/data/mnist{got_text(value)}"
        )
        return None
    if value.rstrip("/") == "":
        errs.add(path, "must be a directory below /, not the root directory itself")
        return None
    if problem := _host_path_problem(value):
        errs.add(path, f"must be a plain absolute path: {problem}")
        return None
    return value


def _host_path_problem(value: str) -> str | None:
    """Why `value` cannot name a dir on Linux (what the kernel would refuse, and `..`)."""
    if "\x00" in value or "\n" in value:
        return "it holds a NUL byte or a newline"
    if ".." in value.split("/"):
        return "without '..', got one"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limits.MAX_PATH_BYTES:
        return f"at most {limits.MAX_PATH_BYTES} bytes long (UTF-8), got {size}"
    for part in value.split("/"):
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > limits.MAX_NAME_BYTES:
            return (
                f"each component at most {limits.MAX_NAME_BYTES} bytes long (UTF-8), "
                f"got one of {size}: {show(part)}"
            )
    return None


def read_webhook(errs: Errors, path: str, value: object) -> str | None:
    """An http(s) URL with a host, like https://hooks.example.com/gpuyard."""
    expected = "must be an http:// or https:// URL with a host, like https://hooks.example.com/x"
    if (
        not isinstance(value, str)
        or len(value) > limits.MAX_URL_CHARS
        or not value.isprintable()
        or value != value.strip()
    ):
        errs.add(path, f"{expected}{got_text(value)}")
        return None
    try:
        parts = urlsplit(value)
        host = parts.hostname if parts.port is None or parts.port > 0 else None
    except ValueError:  # a bad port or IPv6 address
        parts, host = None, None
    if parts is None or parts.scheme not in limits.WEBHOOK_SCHEMES or not host:
        errs.add(path, f"{expected}{got_text(value)}")
        return None
    return value


def scalar_text(value: object) -> str | None:
    """A scalar as text: strings as they are, numbers as written, true/false in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return str(value)
    if isinstance(value, HugeNumber):
        return value.text
    return None


def _env_key_problem(key: object) -> str | None:
    if not isinstance(key, str) or not limits.ENV_KEY_RE.fullmatch(key):
        return "is not a valid variable name: use letters, digits and '_', not a digit first"
    if key.upper().startswith(limits.ENV_RESERVED_PREFIXES):
        return "is reserved: names starting with GPUYARD_ or PAI_ are set by the platform"
    if key.upper() in limits.ENV_RESERVED_NAMES:
        return "is reserved: the platform sets it to the task's own GPUs"
    if key.upper() in limits.ENV_DISTRIBUTED_NAMES:
        return "is reserved: the platform sets it for each task of the job (rank, world, master)"
    return None


def _secret_inner(errs: Errors, path: str, value: object) -> tuple[object, bool] | None:
    """`{secret: X}` → (X, True); any other value → (value, False); None after an error."""
    if not isinstance(value, dict):
        return value, False
    if list(value) != [SECRET_KEY]:
        errs.add(path, f"must be a value, or {{{SECRET_KEY}: VALUE}} for a secret{got(value)}")
        return None
    return value[SECRET_KEY], True


def _env_value(errs: Errors, where: str, raw: object) -> str | Secret | None:
    inner = _secret_inner(errs, where, raw)
    if inner is None:
        return None
    value, secret = inner
    text = scalar_text(value)
    if text is None:
        errs.add(where, f"must be a string, a number or true/false{got(value)}")
    elif len(text) > limits.MAX_ENV_VALUE_CHARS:
        errs.add(where, f"must be at most {limits.MAX_ENV_VALUE_CHARS} characters long")
    elif "\x00" in text:
        errs.add(where, "must not hold a NUL byte (a process cannot be given one)")
    else:
        return Secret(text) if secret else text
    return None


def read_env(errs: Errors, path: str, value: object) -> dict[str, str | Secret] | None:
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping of variable names to values{got(value)}")
        return None
    if len(value) > limits.MAX_ENV_VARS:
        errs.add(path, f"must have at most {limits.MAX_ENV_VARS} variables, got {len(value)}")
        return None
    out: dict[str, str | Secret] = {}
    for key, raw in value.items():
        where = join(path, key)
        problem = _env_key_problem(key)
        if problem is not None:
            errs.add(where, problem)
        elif (text := _env_value(errs, where, raw)) is not None:
            out[str(key)] = text
    return out


def _command_lines(errs: Errors, path: str, value: list[object]) -> str | None:
    bad = [i for i, line in enumerate(value) if not isinstance(line, str)]
    for i in bad:
        errs.add(item(path, i), f"must be a string (one line of the command){got_text(value[i])}")
    for i, line in enumerate(value):
        if isinstance(line, str) and "\x00" in line:
            errs.add(item(path, i), "must not hold a NUL byte (it would cut the command there)")
            bad.append(i)
    return None if bad else "\n".join(value)  # type: ignore[arg-type]


def read_command(errs: Errors, path: str, value: object) -> str | Secret | None:
    """A shell command: a string, or a list of strings run one after the other; either may
    be wrapped as `{secret: ...}` (an OpenPAI command with a secret substituted in it)."""
    inner = _secret_inner(errs, path, value)
    if inner is None:
        return None
    raw, secret = inner
    value = _command_lines(errs, path, raw) if isinstance(raw, list) else raw
    if value is None and isinstance(raw, list):
        return None
    if not isinstance(value, str) or not value.strip():
        errs.add(path, f"must be a non-empty command, like python train.py{got_text(raw)}")
        return None
    if len(value) > limits.MAX_COMMAND_CHARS:
        errs.add(path, f"must be at most {limits.MAX_COMMAND_CHARS} characters long")
        return None
    if "\x00" in value:
        errs.add(path, "must not hold a NUL byte (it would cut the command there)")
        return None
    return Secret(value) if secret else value

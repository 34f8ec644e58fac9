"""Why a task ended, from its wait status, its cgroup's OOM counter, its log and crun/runc.

Reasons (model.TaskReason), first match wins:
- `OOMKilled`: non-zero exit and the cgroup's `oom_kill` counter > 0;
- `Completed`: exit 0;
- `Signal(SIGx)`: killed by signal x, or exit 128+x (how a shell reports a killed child);
- `CommandNotFound`: exit 127 (the shell's "not found");
- `Error(exit N)` otherwise.
A container that could not be created or started ends as `AgentError` with crun/runc's error,
or `CommandNotFound` when that error says the executable is missing.
Failure messages end with the last lines of the task's log, always after the line `LOG_LINES`
(also when nothing comes before it): the API cuts there for callers who may not read the logs.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from gpuyard.model import TaskReason

TAIL_LINES = 20
#: the line before a message's log lines: everything after it is the task's log
LOG_LINES = "--- last lines of the log ---"
TAIL_BYTES = 64 * 1024
NOT_FOUND_RE = re.compile(
    r"executable file .*not found|exec: .*no such file or directory|executable file not found",
    re.IGNORECASE,
)


def tail_lines(path: Path, lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> str:
    """The last `lines` whole lines of a file, reading at most `max_bytes` of its end."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes - 1)  # one byte more: is the cut on a line start?
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return ""
    if start > 0:
        data = data.split(b"\n", 1)[-1]  # drop the partial first line (or the lone newline)
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.rstrip("\n").split("\n")[-lines:]) if lines > 0 and text else ""


def decode_wait_status(status: int) -> tuple[int, int | None]:
    """(exit code as a shell reports it, the signal that killed it or None)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, sig
    return os.waitstatus_to_exitcode(status), None


def _shell_signal(code: int) -> int | None:
    """The signal n of an exit code 128+n, if n is a real signal."""
    if 128 < code < 128 + signal.NSIG:
        try:
            return signal.Signals(code - 128).value
        except ValueError:
            return None
    return None


def exit_reason(code: int, sig: int | None, oom_kills: int) -> str:
    if code != 0 and oom_kills > 0:
        return TaskReason.OOM_KILLED
    if code == 0:
        return TaskReason.COMPLETED
    sig = sig if sig is not None else _shell_signal(code)
    if sig is not None:
        return TaskReason.signal(sig)
    if code == 127:
        return TaskReason.COMMAND_NOT_FOUND
    return TaskReason.error(code)


def runtime_errors(runtime_log: Path) -> str:
    """The error messages crun/runc wrote to their json log, one per line."""
    messages = []
    try:
        lines = runtime_log.read_text(errors="replace").splitlines()[-50:]
    except OSError:
        return ""
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            messages.append(line)
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic"):
            messages.append(str(entry.get("msg", "")))
    return "\n".join(m for m in messages if m)


def launch_failure_reason(error: str) -> str:
    return TaskReason.COMMAND_NOT_FOUND if NOT_FOUND_RE.search(error) else TaskReason.AGENT_ERROR


def with_log(message: str, log: Path) -> str:
    """`message`, then `LOG_LINES` and the last lines of the log when there are any."""
    tail = tail_lines(log)
    if not tail:
        return message
    return f"{message}\n{LOG_LINES}\n{tail}" if message else f"{LOG_LINES}\n{tail}"

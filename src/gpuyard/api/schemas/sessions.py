"""The first message of an exec or port-forward WebSocket (`api/routers/sessions.py`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from gpuyard.api.schemas.jobcontrol import In

TASK_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*/\d+$"
MAX_ARG = 32 << 10
MAX_ARGS = 1024

Task = Annotated[StrictStr | None, Field(pattern=TASK_PATTERN)]


class ExecIn(In):
    """`command`: the program and its arguments (no shell around it); `tty`: a terminal of
    `rows` × `cols`; `task`: `role/index` (default: the job's first task). `attach`: the
    session of an interactive job (`gpuyard run`, docs/interactive.md): the server waits
    for the task to run, telling its progress (channel 6), and the job ends with the
    session."""

    command: Annotated[
        list[Annotated[StrictStr, Field(max_length=MAX_ARG)]],
        Field(min_length=1, max_length=MAX_ARGS),
    ]
    task: Task = None
    tty: StrictBool = False
    rows: Annotated[StrictInt, Field(ge=1, le=9999)] = 24
    cols: Annotated[StrictInt, Field(ge=1, le=9999)] = 80
    attach: StrictBool = False


class PortIn(In):
    """`port`: a TCP port on the task's own loopback, or `"ssh"`: the task's sshd port
    (`gpuyard ssh`, resolved by the server); `session`: the client's name for one
    `port-forward` run, so that its many connections are one event on the job."""

    port: Annotated[StrictInt, Field(ge=1, le=65535)] | Literal["ssh"]
    task: Task = None
    session: Annotated[StrictStr | None, Field(max_length=64)] = None

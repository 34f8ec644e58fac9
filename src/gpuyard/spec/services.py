"""Our format's `services` field: the job's web endpoints, which the platform proxies for
whoever may open them (docs/services.md).

```yaml
services:
  notebook: 8888                          # the first role's task 0, port 8888
  board: {port: 6006, task: worker/1}     # or a task of its own, ROLE/INDEX
  lab: {port: 8888, stripPrefix: false}   # the app gets the whole path (it has a base URL)
```
"""

from __future__ import annotations

import re

from gpuyard.spec import limits
from gpuyard.spec.errors import Errors, got, join, unknown_field
from gpuyard.spec.fields import read_flag, whole
from gpuyard.spec.models import ServiceSpec, TaskRoleSpec

NAME_RE = re.compile(r"[a-z0-9-]{1,32}")
NAME_RULE = "1 to 32 of a-z, 0-9 and '-'"
TASK_RE = re.compile(rf"({limits.ROLE_RE.pattern})/(0|[1-9][0-9]{{0,3}})")
MAX_SERVICES = 16
KEYS = ("port", "task", "stripPrefix")
_port = whole(1, 65535, "a port number from 1 to 65535")


def read_services(errs: Errors, path: str, value: object) -> tuple[ServiceSpec, ...] | None:
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping of NAME: PORT, like {{notebook: 8888}}{got(value)}")
        return None
    if len(value) > MAX_SERVICES:
        errs.add(path, f"must have at most {MAX_SERVICES} services, got {len(value)}")
        return None
    services = []
    for name, body in value.items():
        where = join(path, name)
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            errs.add(where, f"is not a valid service name: use {NAME_RULE}")
            continue
        service = _read_one(errs, where, name, body)
        if service is not None:
            services.append(service)
    return tuple(services)


def _read_one(errs: Errors, where: str, name: str, body: object) -> ServiceSpec | None:
    if not isinstance(body, dict):
        port = _port(errs, where, body)
        return None if port is None else ServiceSpec(name, port)
    for key in body:
        if key not in KEYS:
            errs.add(join(where, key), unknown_field(key, list(KEYS)))
    port = _port(errs, join(where, "port"), body.get("port"))
    task = body.get("task")
    if task is not None and (not isinstance(task, str) or not TASK_RE.fullmatch(task)):
        errs.add(join(where, "task"), f"must be a task as ROLE/INDEX, like worker/0{got(task)}")
        return None
    strip = body.get("stripPrefix")
    strip = True if strip is None else read_flag(errs, join(where, "stripPrefix"), strip)
    if port is None or strip is None:
        return None
    return ServiceSpec(name, port, task, strip)


def check_service_tasks(
    errs: Errors, services: tuple[ServiceSpec, ...] | None, roles: dict[str, TaskRoleSpec] | None
) -> None:
    """A service's task must be one of the job's: its role exists, its index is below the
    role's taskNumber."""
    for service in services or ():
        if service.task is None or not roles:
            continue
        role, index = service.task.split("/")
        where = join(join("services", service.name), "task")
        if role not in roles:
            errs.add(where, f"names no role of this job: its roles are {', '.join(roles)}")
        elif int(index) >= roles[role].task_number:
            count = roles[role].task_number
            errs.add(where, f"names no task: role {role} has {count} task(s), from {role}/0")


"""Our format's `ssh` field: what OpenPAI's `ssh` runtime plugin becomes
(spec/openpai_plugins.py), usable on its own too.

```yaml
ssh:
  jobKeys: true                  # the job's own key pair in every task: `ssh worker-1` works
  authorizedKeys: ["ssh-ed25519 AAAA... me@laptop"]   # the user's public keys
  taskRoles: [worker]            # the roles that run sshd (default: all)
  barrier: false                 # wait until every task's sshd answers before the command
  barrierTimeout: 30m
  failurePolicy: fail            # fail | ignore: a sshd that does not start fails the task
```

A public key is one line `TYPE BASE64 [COMMENT]` of a known type, without authorized_keys
options (`command=`, `from=`): what goes into the tasks' authorized_keys is the key, nothing
it could add.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from gpuyard.spec.errors import Errors, got, item, join, unknown_field
from gpuyard.spec.fields import read_duration, read_flag
from gpuyard.spec.models import SshSpec

KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MAX_KEYS = 32
MAX_KEY_CHARS = 16 * 1024
COMMENT_RE = re.compile(r"[\x20-\x7e]*")
SSH_KEYS = ("jobKeys", "authorizedKeys", "taskRoles", "barrier", "barrierTimeout", "failurePolicy")
DEFAULT_BARRIER_S = 1800  # OpenPAI's sshbarrierTimeout default: 30 minutes


def public_key_problem(line: str) -> str | None:
    """Why `line` is not one OpenSSH public key (None: it is)."""
    if len(line) > MAX_KEY_CHARS or "\n" in line or "\r" in line or "\0" in line:
        return f"must be one line of at most {MAX_KEY_CHARS} characters"
    parts = line.strip().split(None, 2)
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        return f"must be a public key 'TYPE BASE64 [COMMENT]', TYPE one of {', '.join(KEY_TYPES)}"
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return "must be a public key: its second word is not base64"
    if not blob.startswith(len(parts[0]).to_bytes(4, "big") + parts[0].encode()):
        return f"must be a public key: its data is not a {parts[0]} key"
    if len(parts) == 3 and not COMMENT_RE.fullmatch(parts[2]):
        return "must be a public key: its comment holds control characters"
    return None


def public_key_lines(errs: Errors, path: str, value: object) -> tuple[str, ...]:
    """A string of one key a line (blank lines skipped), each checked; () after an error."""
    if not isinstance(value, str):
        errs.add(path, f"must be a public key like 'ssh-ed25519 AAAA... me@host'{got(value)}")
        return ()
    lines = [line.strip() for line in value.replace("\r\n", "\n").split("\n") if line.strip()]
    return tuple(k for k in (_key(errs, path, line) for line in lines) if k is not None)


def _key(errs: Errors, path: str, line: str) -> str | None:
    if (problem := public_key_problem(line)) is not None:
        errs.add(path, f"{problem}{got(line)}")
        return None
    return " ".join(line.split(None, 2))


def _keys(errs: Errors, path: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_KEYS:
        errs.add(path, f"must be a list of at most {MAX_KEYS} public keys{got(value)}")
        return ()
    return tuple(k for i, v in enumerate(value) for k in public_key_lines(errs, item(path, i), v))


def _roles(errs: Errors, path: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        errs.add(path, f"must be a list of task role names{got(value)}")
        return ()
    return tuple(value)


def read_ssh(errs: Errors, path: str, value: object) -> SshSpec | None:
    """Our `ssh` field (the module's docstring)."""
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping like {{jobKeys: true}}{got(value)}")
        return None
    for key in value:
        if key not in SSH_KEYS:
            errs.add(join(path, key), unknown_field(key, SSH_KEYS))
    policy = value.get("failurePolicy", "fail")
    if policy not in ("fail", "ignore"):
        errs.add(join(path, "failurePolicy"), f"must be fail or ignore{got(policy)}")
    flags = {k: read_flag(errs, join(path, k), value[k]) for k in ("jobKeys", "barrier") if
             value.get(k) is not None}  # fmt: skip
    timeout = value.get("barrierTimeout")
    return SshSpec(
        job_keys=flags.get("jobKeys", True) is not False,
        authorized_keys=_keys(errs, join(path, "authorizedKeys"), value.get("authorizedKeys", [])),
        roles=_roles(errs, join(path, "taskRoles"), value.get("taskRoles", [])),
        barrier=flags.get("barrier") is True,
        barrier_timeout_s=(
            read_duration(errs, join(path, "barrierTimeout"), timeout) or DEFAULT_BARRIER_S
            if timeout is not None
            else DEFAULT_BARRIER_S
        ),
        required=policy != "ignore",
    )


def check_ssh_roles(errs: Errors, ssh: SshSpec | None, roles: dict[str, Any] | None) -> None:
    """Every role `ssh.taskRoles` names is one of the job's."""
    if ssh is None or roles is None:
        return
    for i, name in enumerate(ssh.roles):
        if name not in roles:
            errs.add(item("ssh.taskRoles", i), f"there is no task role {name!r} in taskRoles")

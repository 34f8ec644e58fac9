"""A job's ssh keys: the same for every task of an attempt, unrelated across jobs, attempts and
secrets keys; none for a job without ssh."""

from __future__ import annotations

from cryptography.fernet import Fernet

from gpuyard.controller.sshkeys import ssh_launch
from gpuyard.spec import parse_job_spec
from gpuyard.store.secrets import SecretBox

SPEC = parse_job_spec({"name": "j", "ssh": {"barrier": True, "taskRoles": ["w"]},
                       "taskRoles": {"w": {"command": "true"}}})  # fmt: skip


def test_keys_are_per_job_attempt_and_secrets_key() -> None:
    box = SecretBox(Fernet.generate_key())
    one = ssh_launch(SPEC, "job-1", 1, box)
    assert one is not None and one == ssh_launch(SPEC, "job-1", 1, box)
    assert one.host_seed != one.job_seed and one.roles == ("w",) and one.barrier_s == 1800
    others = [ssh_launch(SPEC, "job-2", 1, box), ssh_launch(SPEC, "job-1", 2, box),
              ssh_launch(SPEC, "job-1", 1, SecretBox(Fernet.generate_key()))]  # fmt: skip
    for other in others:
        assert other is not None
        assert {other.host_seed, other.job_seed}.isdisjoint({one.host_seed, one.job_seed})
    plain = parse_job_spec({"name": "j", "taskRoles": {"w": {"command": "true"}}})
    assert ssh_launch(plain, "job-1", 1, box) is None

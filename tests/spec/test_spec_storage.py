"""Our `storage` field and OpenPAI's teamwise_storage: names only (what they mean is the
tenant's, checked by the API); the OpenPAI path of each name, for errors found later."""

from __future__ import annotations

import pytest

from gpuyard.spec import SpecError, parse_job_spec
from gpuyard.spec.openpai_storage import storage_paths

ROLES = {"w": {"command": "x"}}


def test_names_round_trip_and_are_shown_only_when_given():
    spec = parse_job_spec({"name": "a", "storage": ["PAI_SHARE", "ds-1"], "taskRoles": ROLES})
    assert spec.storage == ("PAI_SHARE", "ds-1")
    assert parse_job_spec(spec.to_document()) == spec
    assert "storage" not in parse_job_spec({"name": "a", "taskRoles": ROLES}).to_document()


@pytest.mark.parametrize(
    ("value", "path"),
    [("ds", "storage"), (["ds", "ds"], "storage[1]"), (["../etc"], "storage[0]"),
     ([1], "storage[0]"), ([f"n{i}" for i in range(17)], "storage"), (["a" * 64], "storage[0]")],
)
def test_bad_storage_is_refused_at_its_path(value, path):
    with pytest.raises(SpecError) as e:
        parse_job_spec({"name": "a", "storage": value, "taskRoles": ROLES})
    assert [err.path for err in e.value.errors] == [path]


def test_openpai_paths_of_the_names():
    plugins = [
        {"plugin": "cmd", "parameters": {"preCommands": ["x"]}},
        {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["a", "b"]}},
        {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["c"]}},
    ]
    doc = {"protocolVersion": 2, "extras": {"com.microsoft.pai.runtimeplugin": plugins}}
    where = "extras.com.microsoft.pai.runtimeplugin"
    paths = storage_paths(doc)
    assert paths["storage[1]"] == f"{where}[1].parameters.storageConfigNames[1]"
    assert paths["storage[2]"] == f"{where}[2].parameters.storageConfigNames[0]"

"""Job array expressions, per-index parameters and `after` in a spec: what is read, and
where a bad value is reported."""

from __future__ import annotations

import pytest

from gpuyard.spec import SpecError, array_children, parse_job
from gpuyard.spec.arrays import MAX_ARRAY_SIZE

BASE = {"name": "x", "taskRoles": {"w": {"command": "echo"}}}


def array_of(expr: object, **extra: object):
    return parse_job({**BASE, "array": expr, **extra}).array


@pytest.mark.parametrize(
    ("expr", "indices", "limit"),
    [
        ("0-4", (0, 1, 2, 3, 4), None),
        ("0-49%8", tuple(range(50)), 8),
        ("1,3,5-9", (1, 3, 5, 6, 7, 8, 9), None),
        ("0-20:5", (0, 5, 10, 15, 20), None),
        ("7", (7,), None),
        ("9,2%1", (2, 9), 1),
    ],
)
def test_array_expressions(expr, indices, limit):
    array = array_of(expr)
    assert (array.indices, array.limit, array.expression) == (indices, limit, expr)


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("5-1", "goes up"),
        ("0-4:0", "goes up"),
        ("x", "not an index"),
        ("0-4%", "limit after %"),
        ("0-4%0", "limit after %"),
        ("1,1", "given twice"),
        (f"0-{MAX_ARRAY_SIZE}", "more than"),
        ("0-2000000", "go up to"),
        (12, "must be text, like '0-11'"),
        (True, "must be text"),
        ("", "not an index"),
    ],
)
def test_bad_array_expressions_name_the_field(expr, words):
    with pytest.raises(SpecError) as err:
        array_of(expr)
    assert [e.path for e in err.value.errors] == ["array"]
    assert words in err.value.errors[0].message


def test_errors_of_the_array_and_of_the_spec_come_together():
    with pytest.raises(SpecError) as err:
        parse_job({"name": "x", "array": "x", "taskRoles": {"w": {"cpuNumber": 0}}})
    paths = {e.path for e in err.value.errors}
    assert {"array", "taskRoles.w.cpuNumber", "taskRoles.w.command"} <= paths


def test_each_index_gets_its_own_parameters_as_env():
    loaded = parse_job({**BASE, "array": "3-4", "arrayParameters": [{"LR": 1}, {"LR": "2"}]})
    children = array_children(loaded)
    assert [(i, c.spec.env) for i, c in children] == [(3, {"LR": "1"}), (4, {"LR": "2"})]
    assert loaded.spec.env == {"LR": "1"}  # the array's spec is its first child's


def test_children_without_parameters_share_one_spec():
    children = array_children(parse_job({**BASE, "array": "0-99"}))
    assert len(children) == 100 and len({id(c) for _, c in children}) == 1


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ("x", "arrayParameters"),
        ([{"A": 1}], "arrayParameters"),
        ([{"A": 1}, 3], "arrayParameters[1]"),
        ([{"A": 1}, {"PAI_X": 1}], "arrayParameters[1].PAI_X"),
        ([{"A": 1}, {"A": [1]}], "arrayParameters[1].A"),
    ],
)
def test_bad_parameters_name_the_index(params, path):
    with pytest.raises(SpecError) as err:
        array_of("0-1", arrayParameters=params)
    assert path in [e.path for e in err.value.errors]


def test_openpai_parameters_per_index_fill_the_commands():
    doc = {
        "protocolVersion": 2,
        "name": "p",
        "parameters": {"lr": 1, "bs": 8},
        "array": "0-1",
        "arrayParameters": [{"lr": 0.1}, {"lr": 0.2}],
        "taskRoles": {
            "w": {
                "instances": 1,
                "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
                "commands": ["train <% $parameters.lr %> <% $parameters.bs %>"],
            }
        },
    }
    children = array_children(parse_job(doc))
    lines = [c.spec.task_roles["w"].command.splitlines()[-1] for _, c in children]
    assert lines == ["train 0.1 8", "train 0.2 8"]
    assert [c.original["parameters"]["lr"] for _, c in children] == [0.1, 0.2]
    assert all("array" not in c.original for _, c in children)


def test_a_parameter_only_one_index_lacks_is_an_error_at_that_index():
    doc = {
        "protocolVersion": 2,
        "name": "p",
        "array": "0-1",
        "arrayParameters": [{"lr": 0.1}, {"other": 1}],
        "taskRoles": {"w": {"commands": ["train <% $parameters.lr %>"]}},
    }
    with pytest.raises(SpecError) as err:
        array_children(parse_job(doc))
    assert "array index 1" in str(err.value)


def test_after_round_trips_through_the_document():
    spec = parse_job({**BASE, "after": {"ok": ["a1", "a1"], "any": "b2"}}).spec
    assert (spec.after.ok, spec.after.any, spec.after.notok) == (("a1",), ("b2",), ())
    doc = spec.to_document()
    assert doc["after"] == {"ok": ["a1"], "any": ["b2"]}
    assert parse_job(doc).spec == spec
    assert "after" not in parse_job(BASE).spec.to_document()
    assert parse_job({**BASE, "after": {}}).spec.after is None


def test_openpai_after_is_passed_on():
    doc = {
        "protocolVersion": 2,
        "name": "p",
        "after": {"notok": ["abc"]},
        "taskRoles": {"w": {"commands": ["true"]}},
    }
    assert parse_job(doc).spec.after.notok == ("abc",)


@pytest.mark.parametrize(
    ("after", "path"),
    [
        ("abc", "after"),
        ({"ok": 3}, "after.ok"),
        ({"ok": ["x y"]}, "after.ok[0]"),
        ({"afterok": ["x"]}, "after.afterok"),
        ({"ok": [f"j{i}" for i in range(101)]}, "after"),
    ],
)
def test_bad_after_names_the_field(after, path):
    with pytest.raises(SpecError) as err:
        parse_job({**BASE, "after": after})
    assert path in [e.path for e in err.value.errors]

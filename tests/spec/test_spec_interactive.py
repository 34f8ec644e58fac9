"""The spec's `interactive` (docs/interactive.md, docs/spec.md): true or false, given only
when true in the document it normalises to, and never with retries."""

from __future__ import annotations

import pytest
from spec_docs import doc

from gpuyard.spec import SpecError, parse_job_spec


def test_interactive_is_kept_and_given_back_only_when_true():
    spec = parse_job_spec(doc(interactive=True))
    assert spec.interactive and spec.to_document()["interactive"] is True
    assert parse_job_spec(spec.to_document()) == spec
    plain = parse_job_spec(doc(interactive=False))
    assert not plain.interactive and "interactive" not in plain.to_document()
    assert not parse_job_spec(doc()).interactive


@pytest.mark.parametrize("value", ["yes", 1, "true", []])
def test_interactive_is_true_or_false(value):
    with pytest.raises(SpecError) as err:
        parse_job_spec(doc(interactive=value))
    assert [e.path for e in err.value.errors] == ["interactive"]
    assert "must be true or false" in err.value.errors[0].message


def test_an_interactive_job_is_not_retried():
    with pytest.raises(SpecError) as err:
        parse_job_spec(doc(interactive=True, retryCount=2))
    (error,) = err.value.errors
    assert error.path == "retryCount" and "must be 0 for an interactive job" in error.message
    assert parse_job_spec(doc(interactive=False, retryCount=2)).retry_count == 2

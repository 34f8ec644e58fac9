"""Run-time estimates from history: same name first, then the same user, never across users."""

from gpuyard.scheduler.estimates import RuntimeEstimator


def test_same_name_first_then_user_then_none():
    e = RuntimeEstimator()
    assert e.estimate("t", "ana", "train") is None
    for s in (100, 200, 900):
        e.observe("t", "ana", "train", s)
    e.observe("t", "ana", "eval", 10)
    got = e.estimate("t", "ana", "train")
    assert (got.seconds, got.basis, got.samples) == (200, "name", 3)
    other = e.estimate("t", "ana", "sweep")
    assert (other.seconds, other.basis, other.samples) == (150, "user", 4)
    assert e.estimate("t", "bob", "train") is None
    assert e.estimate("u", "ana", "train") is None  # another tenant's ana


def test_window_forgets_old_runs_and_no_user_teaches_nothing():
    e = RuntimeEstimator(name_window=2, user_window=3)
    for s in (1000, 10, 20):
        e.observe("t", "ana", "job", s)
    assert e.estimate("t", "ana", "job").seconds == 15
    e.observe("t", None, "job", 5)
    assert e.estimate("t", None, "job") is None
    assert "2 runs of this name" in e.estimate("t", "ana", "job").describe()

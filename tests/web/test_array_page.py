"""The portal's job array page and a child's and a dependent's job page, over the real app
(tests/web/test_routes.py's way): the array's counts and children, the links both ways, the
`after` jobs; another tenant's member gets the array's page as a 404."""

from __future__ import annotations

from api.conftest import spec, world  # noqa: F401 - the fixture
from web.test_routes import page


def test_the_array_page_and_the_childs(world):  # noqa: F811
    r = world.submit("alice", spec("red", "sweep", "array: '0-2%1'\n"))
    assert r.status_code == 201, r.text
    array, children = r.json()["id"], r.json()["children"]
    world.ctl.run_cycle()
    html = page(world, "vic", "GET", f"/arrays/{array}").text  # a viewer sees it
    assert "0-2%1" in html and "at most 1" in html and 'id="children"' in html
    assert all(f'href="/jobs/{c}"' in html for c in children)
    assert "1 SCHEDULED" in html and "2 QUEUED" in html
    child = page(world, "alice", "GET", f"/jobs/{children[2]}").text
    assert f'href="/arrays/{array}"' in child and "ArrayTaskLimit" in child
    assert page(world, "bob", "GET", f"/arrays/{array}").status_code == 404


def test_a_dependents_page_links_its_jobs(world):  # noqa: F811
    first = world.jobs["red"]
    r = world.submit("alice", spec("red", "then", f"after: {{any: [{first}]}}\n"))
    assert r.status_code == 201, r.text
    html = page(world, "alice", "GET", f"/jobs/{r.json()['id']}").text
    assert 'id="after"' in html and f'href="/jobs/{first}"' in html

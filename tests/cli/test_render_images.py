"""`gpuyard show`'s image line: where the job's image is, by state, from the job's `images`."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from gpuyard.cli.render import image_presence, job_header


def test_show_says_where_the_image_is_present() -> None:
    image = {"image": "reg/app:1", "nodes": {"b": "pulling", "a": "present", "c": "present"}}
    assert str(image_presence(image)) == "reg/app:1  present: a, c; pulling: b"
    assert str(image_presence({"image": "x:1", "nodes": {}})) == "x:1  on no node yet"
    out = StringIO()
    Console(file=out, width=200).print(job_header({"id": "j1", "name": "n", "images": [image]}))
    assert "image" in out.getvalue() and "present: a, c" in out.getvalue()

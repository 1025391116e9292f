"""The book's extension removes repeated <script> entries (sphinx-thebe declares its
configuration twice, a console error on every page; issue 22)."""

from __future__ import annotations

import sys
from pathlib import Path

from sphinx.builders.html._assets import _JavaScript

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))


def test_a_script_registered_twice_is_emitted_once():
    import ntpbook

    body = 'const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'
    scripts = [
        _JavaScript("_static/a.js"),
        _JavaScript(None, body=body),
        _JavaScript("_static/a.js"),
        _JavaScript("", body=body),
        _JavaScript(None, body="const other = 1"),
    ]
    context = {"script_files": scripts}
    ntpbook._dedupe_scripts(None, "page", "page.html", context, None)
    assert [(s.filename, s.attributes.get("body")) for s in context["script_files"]] == [
        ("_static/a.js", None),
        (None, body),
        (None, "const other = 1"),
    ]

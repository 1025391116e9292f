"""The book as a reader sees it: captions, the Reproducing page's cells and the browser
check's controls.

The browser check itself (``make browser-test``) runs over a built book at 1366 and 420 px;
here its negative controls run (pages with raw TeX in the text or in a cell's printed output,
a table or equation wider than the column, a table not scrollable on a phone, a word broken
across lines, a column one word wide, maths cut off, a page wider than a phone, a cut notebook
line, the sidebar's title scrolled away, a console error, a request leaving the machine, a
scrollbar under a formula that fits, a phone table that scrolls with no shade, an image not
linked to its file, two header bars, "(quick)" marked number by number, two pages with one
title, an executed notebook with no link back to its figure or with one to another figure,
each of which it must fail, and a page that must pass), when Node.js, playwright-core and
Chromium are installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ntpcore.runner.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]


def _ntpbook():
    spec = importlib.util.spec_from_file_location("ntpbook", ROOT / "book" / "_ext" / "ntpbook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_registry_entry_names_a_key_metric():
    missing = [fig_id for fig_id, e in load_registry().items() if not e.key_metric]
    assert not missing


def test_key_metric_is_the_registry_choice_not_the_first_name():
    key_metric = _ntpbook()._key_metric
    metrics = {"attn_final": 0.99, "corr_svm_final": 0.97, "loss_final": 1e-4}
    assert key_metric("corr_svm_final", metrics) == ("corr_svm_final", 0.97)
    assert key_metric("not_recorded", metrics) is None
    assert key_metric("", metrics) is None


def test_key_metric_family_takes_the_largest_number():
    key_metric = _ntpbook()._key_metric
    metrics = {"sc_H_epoch_0": 0.7, "sc_H_epoch_150": 0.98, "sc_H_epoch_53": 0.97, "x": 1}
    assert key_metric("sc_H_epoch_*", metrics) == ("sc_H_epoch_150", 0.98)
    assert key_metric("other_*", metrics) is None


@pytest.mark.parametrize("label", ["-", "—", " "])
def test_a_dash_label_is_not_a_list_item(label):
    assert _ntpbook()._paper_label(label) == "beyond the paper"
    assert _ntpbook()._paper_label("Fig. 3") == "Fig. 3"


@pytest.mark.long
def test_browser_check_fails_its_negative_controls():
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not (
        shutil.which("node")
        and (ROOT / "node_modules" / "playwright-core").is_dir()
        and os.access(chromium, os.X_OK)
    ):
        pytest.skip("needs node, npm ci (playwright-core) and chromium")
    done = subprocess.run(
        ["node", "tests/browser/check_book.mjs", "--self-test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    fixtures = sorted(p.name for p in (ROOT / "tests" / "browser" / "fixtures").rglob("*.html"))
    assert f"self-test: {len(fixtures)} passed, 0 failed" in done.stdout


@pytest.mark.parametrize(
    ("label", "text"),
    [
        ("Fig. 5", "{cite:t}`p`, Fig. 5"),
        (
            "appendix figure: logits, TinyStories",
            "{cite:t}`p`, appendix figure: logits, TinyStories",
        ),
        ("-", "beyond the paper's figures"),
        ("— (Theorem 1)", "beyond the paper's figures; it illustrates Theorem 1 of {cite:t}`p`"),
    ],
)
def test_a_caption_says_where_the_figure_stands_in_the_paper(label, text):
    """The book numbers its figures; the paper's label follows the title in parentheses,
    with the paper named, and no label leaks as "(— (Theorem 1) of ...)"."""
    assert _ntpbook().figure_source(label, "p") == text


def test_every_registry_label_makes_a_clean_caption():
    for fig_id, entry in load_registry().items():
        source = _ntpbook().figure_source(entry.paper_label, "p")
        assert not re.search(r"\(\s*[—-]|App\. \(|\(\w+ \(", source), (fig_id, source)
        assert not source.startswith(("—", "-")), (fig_id, source)


def test_alternative_text_has_no_tex():
    words = _ntpbook().tex_to_words
    for fig_id, entry in load_registry().items():
        alt = words(entry.title)
        assert "$" not in alt and "\\" not in alt and "{" not in alt, (fig_id, alt)
    assert words(r"rows of $W^{\mathrm{mm}}$ and $\tilde S$") == "rows of Wmm and S̃"

"""A notebook's references to the book's statements become links in the book
(ntpcore.runner.bookrefs): every one in notebooks/ names a statement the book has, and one
that does not fails the figure."""

from __future__ import annotations

import re

import nbformat
import pytest

from ntpcore.core import paths
from ntpcore.runner import bookrefs, staging


def test_the_parts_are_named_by_their_captions():
    assert bookrefs.parts() == {
        "linear models": "lin",
        "implicit geometry": "geo",
        "self-attention": "att",
    }


def test_every_reference_in_the_notebooks_links_to_its_statement():
    index, part_keys = bookrefs.statements(), bookrefs.parts()
    n = 0
    for path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            n += len(bookrefs.REF.findall(cell.source))
            out = bookrefs.link(cell.source, index, part_keys, path.name)
            assert "[book:" not in out
    assert n >= 30


def test_a_reference_becomes_a_link_to_the_label_of_its_statement():
    index, part_keys = bookrefs.statements(), bookrefs.parts()
    src = (
        "as (*Definition: NTP$_H$-compatibility* [book: linear models]) and "
        "*Theorem: Convergence of gradient descent (reconstructed statement)*"
        " [book: self-attention]"
    )
    assert bookrefs.link(src, index, part_keys) == (
        "as ([*Definition: NTP$_H$-compatibility*](lin-def-compat)) and "
        "[*Theorem: Convergence of gradient descent (reconstructed statement)*](att-thm-gd)"
    )


@pytest.mark.parametrize(
    ("src", "why"),
    [
        ("*Theorem: Implicit bias of gradient decent* [book: linear models]", "no {prf:theorem}"),
        ("*Lemma: Implicit bias of gradient descent* [book: linear models]", "no {prf:lemma}"),
        ("*Theorem: Implicit bias of gradient descent* [book: linear model]", "no part"),
        ("*Theorem: Regularization path* [book: self-attention]", "no {prf:theorem}"),
        ("see the theorem [book: linear models]", "must follow *Kind: Title*"),
    ],
)
def test_an_unknown_reference_is_an_error(src, why):
    with pytest.raises(bookrefs.BookRefError, match=re.escape(why)):
        bookrefs.link(src, bookrefs.statements(), bookrefs.parts(), "x.ipynb")


def test_the_runner_links_the_executed_copy_and_fails_on_an_unknown_reference(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("By *Theorem: Regularization path* [book: linear models]."),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    path = tmp_path / "lin-x.ipynb"
    nbformat.write(nb, path)
    staging._finish_notebook(path)
    assert nbformat.read(path, as_version=4).cells[0].source == (
        "By [*Theorem: Regularization path*](lin-thm-regpath)."
    )
    nb.cells[0].source = "By *Theorem: No such theorem* [book: linear models]."
    nbformat.write(nb, path)
    with pytest.raises(bookrefs.BookRefError, match="lin-x, cell 0: unknown book reference"):
        staging._finish_notebook(path)

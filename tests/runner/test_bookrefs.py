"""A notebook's references to the book's statements and pages become links in the book
(ntpcore.runner.bookrefs): every one in notebooks/ names a statement or a page the book has,
and one that does not fails the figure; the runner also titles a shared notebook's pages
and folds exercises' solutions (ntpcore.runner.staging)."""

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
    index, part_keys, pages = bookrefs.statements(), bookrefs.parts(), bookrefs.pages()
    n = n_pages = 0
    for path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            n += len(bookrefs.REF.findall(cell.source))
            n_pages += len(bookrefs.PAGE_REF.findall(cell.source))
            out = bookrefs.link(cell.source, index, part_keys, path.name, pages)
            assert "[book:" not in out
            assert not re.search(r"book page \*", out), f"{path.name}: a page left unlinked"
    assert n >= 30 and n_pages >= 8


def test_a_page_named_by_its_title_becomes_a_link_to_it():
    pages = bookrefs.pages()
    assert pages["Trained models: UFM, transformer, LSTM"] == "book/geo/training"
    src = "see the book page *Performance* and the book page *Datasets*."
    assert bookrefs.link(src, {}, {}, "x", pages) == (
        "see the book page [*Performance*](../performance.md) and the book page "
        "[*Datasets*](../geo/data.md)."
    )
    with pytest.raises(bookrefs.BookRefError, match="no page titled 'Perfomance'"):
        bookrefs.link("the book page *Perfomance*", {}, {}, "x", pages)


def test_every_figure_is_shown_on_one_page_of_the_book():
    """The page of each figure's ``{ntpfigure}``: an executed page links back to it."""
    from ntpcore.runner.registry import load_registry

    shown = bookrefs.figure_pages()
    assert shown["lin-gd-direction"] == "book/lin/index"
    assert shown["att-conceptual"] == "book/att/theory"
    assert shown["geo-hand-example"] == "book/geo/index"
    missing = {f for f in load_registry() if f not in shown}
    assert missing == {"lin-exercises", "geo-exercises", "att-exercises"}


def test_a_reference_becomes_a_link_to_the_label_of_its_statement():
    index, part_keys = bookrefs.statements(), bookrefs.parts()
    src = (
        "as (*Definition: NTP$_H$-compatibility* [book: linear models]) and "
        "*Theorem: Convergence of gradient descent*"
        " [book: self-attention]"
    )
    assert bookrefs.link(src, index, part_keys) == (
        "as ([*Definition: NTP$_H$-compatibility*](lin-def-compat)) and "
        "[*Theorem: Convergence of gradient descent*](att-thm-gd)"
    )


@pytest.mark.parametrize(
    ("src", "why"),
    [
        ("*Theorem: Implicit bias of gradient decent* [book: linear models]", "no {prf:theorem}"),
        ("*Lemma: Implicit bias of gradient descent* [book: linear models]", "no {prf:lemma}"),
        ("*Theorem: Implicit bias of gradient descent* [book: linear model]", "no part"),
        (
            "*Theorem: Regularization path (reconstructed)* [book: self-attention]",
            "no {prf:theorem}",
        ),
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


def test_the_runner_titles_a_shared_notebook_and_folds_solutions(tmp_path):
    """The registry's ``page_title`` replaces the notebook's title in the executed copy; a
    solution tagged ``solution`` becomes a drop-down (Markdown) or a hidden cell (code)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# The notebook's title\n\nIts introduction."),
        nbformat.v4.new_markdown_cell("**Solution (by hand).** $x = 1$.\n\nBecause."),
        nbformat.v4.new_code_cell("assert 1 == 1"),
    ]
    for cell in nb.cells[1:]:
        cell.metadata["tags"] = ["solution"]
    path = tmp_path / "lin-x.ipynb"
    nbformat.write(nb, path)
    staging._finish_notebook(path, "The page's title: synthetic set")
    title, solution, check = nbformat.read(path, as_version=4).cells
    assert title.source == "# The page's title: synthetic set\n\nIts introduction."
    assert solution.source == "::::{dropdown} Solution (by hand)\n$x = 1$.\n\nBecause.\n::::"
    assert "hide-cell" in check.metadata["tags"]
    assert check.metadata["mystnb"]["code_prompt_show"] == "Show the check of this solution"

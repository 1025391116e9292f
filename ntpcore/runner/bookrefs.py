"""Cross-references from the notebooks to the book's statements.

A notebook's Markdown names a statement of the book by its kind, its title and the part of
the book it is in, e.g. ``*Theorem: Implicit bias of gradient descent* [book: linear models]``:
readable as it is in JupyterLab, where the book is not at hand.  For the book, the runner
rewrites each such reference in the executed copy into a link to the statement,
``[*Theorem: Implicit bias of gradient descent*](lin-thm-gd)``, where ``lin-thm-gd`` is the
``:label:`` of the ``{prf:theorem}`` directive of that title in the part's pages
(``book/<paper>/**/*.md``; a part is named by its caption in ``_toc.yml``, "Linear models
(lin)" -> ``linear models``).  The book's extension resolves such a link to the statement
(``book/_ext/ntpbook.py``), and the strict build fails on one it cannot resolve.

A reference to a statement the book does not have (a title changed on one side only) is a
:class:`BookRefError` naming it, reported by the runner for the figure.

A notebook names a page of the book the same way, by its title: ``the book page *Trained
models: UFM, transformer, LSTM*``.  The runner makes it a link to that page
(``[*Trained models: UFM, transformer, LSTM*](../geo/training.md)``; :func:`pages` reads the
titles of the pages of ``_toc.yml``), and a title the book does not have fails the figure.

:func:`figure_pages` says on which page of the book each figure is shown (its
``{ntpfigure}`` directive): the executed page of a figure links back to it, and the Claims
ledger links each claim to its figure there.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ntpcore.core import paths
from ntpcore.errors import NTPError

__all__ = [
    "PAGE_REF",
    "REF",
    "BookRefError",
    "figure_pages",
    "link",
    "pages",
    "parts",
    "statements",
]

#: ``*Kind: Title* [book: part]`` (the title may hold ``$...$`` maths, not ``*``).
REF = re.compile(
    r"\*(?P<kind>[A-Z][a-z]+): (?P<title>[^*\n]+?)\*[ \t]*\[book: (?P<part>[^\]\n]+)\]"
)
#: ``book page *Title*``: the title of a page of the book (it may run over two lines).
PAGE_REF = re.compile(r"(?P<lead>book\s+page\s+)\*(?P<title>[^*]+?)\*")
_FIGURE = re.compile(r"^(?:`{3,}|:{3,})\{ntpfigure\}[ \t]+(?P<id>\S+)", re.MULTILINE)
_CAPTION = re.compile(r"^(?P<name>.+?) \((?P<key>[a-z]+)\)$")
_DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{prf:(?P<kind>[a-z]+)\}[ \t]*(?P<title>.*?)\s*$")
_OPTION = re.compile(r"^:(?P<name>[\w-]+):[ \t]*(?P<value>.*?)\s*$")


class BookRefError(NTPError):
    """A notebook names a statement the book does not have (or one without a label)."""


def parts(root: Path = paths.ROOT) -> dict[str, str]:
    """The book's parts, by name: ``{"linear models": "lin", ...}`` (from ``_toc.yml``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    out = {}
    for part in toc.get("parts", []):
        m = _CAPTION.match(part.get("caption", ""))
        if m and (root / "book" / m.group("key")).is_dir():
            out[m.group("name").lower()] = m.group("key")
    return out


def _toc_files(root: Path) -> list[str]:
    """Every ``file:`` of ``_toc.yml`` (its root first), as written there."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    out = [toc["root"]] if toc.get("root") else []

    def walk(items: list) -> None:
        for item in items or []:
            if "file" in item:
                out.append(item["file"])
            walk(item.get("sections", []))
            walk(item.get("chapters", []))

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return out


def pages(root: Path = paths.ROOT) -> dict[str, str]:
    """The Markdown pages of the book by title: ``{"Performance": "book/performance"}`` (the
    first ``# `` heading of each page of ``_toc.yml``; executed notebooks are not pages)."""
    out = {}
    for doc in _toc_files(root):
        path = root / f"{doc}.md"
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                out[line[2:].strip()] = doc
                break
    return out


def figure_pages(root: Path = paths.ROOT) -> dict[str, str]:
    """On which page each figure is shown: ``{"lin-gd-direction": "book/lin/index"}`` (the
    page of its ``{ntpfigure}`` directive; the first, if several)."""
    out: dict[str, str] = {}
    for doc in _toc_files(root):
        path = root / f"{doc}.md"
        if path.is_file():
            for m in _FIGURE.finditer(path.read_text(encoding="utf-8")):
                out.setdefault(m.group("id"), doc)
    return out


def statements(root: Path = paths.ROOT) -> dict[tuple[str, str, str], str | None]:
    """Every ``{prf:...}`` statement of the book: ``(part key, kind, title) -> label``.

    ``kind`` is the directive's (``theorem``, ``definition``, ...); the label is ``None``
    for a statement without ``:label:``.
    """
    out: dict[tuple[str, str, str], str | None] = {}
    for key in parts(root).values():
        for page in sorted((root / "book" / key).rglob("*.md")):
            lines = page.read_text(encoding="utf-8").splitlines()
            for i, line in enumerate(lines):
                m = _DIRECTIVE.match(line)
                if not m or m.group("kind") == "proof":
                    continue
                label = None
                for opt in lines[i + 1 :]:
                    o = _OPTION.match(opt)
                    if not o:
                        break
                    if o.group("name") == "label":
                        label = o.group("value")
                out[(key, m.group("kind"), m.group("title"))] = label
    return out


def link(
    source: str,
    index: dict[tuple[str, str, str], str | None],
    part_keys: dict[str, str],
    where: str = "",
    page_index: dict[str, str] | None = None,
) -> str:
    """``source`` (a Markdown cell) with every book reference written as a link to its label,
    and (with ``page_index``, :func:`pages`) every ``book page *Title*`` as a link to the
    page, relative to an executed notebook (``book/executed/``).

    Raises :class:`BookRefError` naming every reference that does not resolve.
    """
    problems = []

    def page(m: re.Match) -> str:
        title = " ".join(m.group("title").split())
        doc = page_index.get(title)
        if doc is None:
            problems.append(
                f"{m.group(0)!r}: the book has no page titled {title!r} (its pages: "
                f"{'; '.join(sorted(page_index))})"
            )
            return m.group(0)
        target = Path(doc).relative_to("book") if doc.startswith("book/") else Path("..", doc)
        return f"{m.group('lead')}[*{title}*](../{target.as_posix()}.md)"

    if page_index is not None:
        source = PAGE_REF.sub(page, source)

    def sub(m: re.Match) -> str:
        kind, title, part = m.group("kind"), m.group("title"), m.group("part")
        key = part_keys.get(part.strip().lower())
        if key is None:
            problems.append(f"{m.group(0)!r}: the book has no part {part!r}")
            return m.group(0)
        if (key, kind.lower(), title) not in index:
            known = sorted(t for (k, d, t) in index if k == key and d == kind.lower())
            problems.append(
                f"{m.group(0)!r}: no {{prf:{kind.lower()}}} titled {title!r} in book/{key}/ "
                f"(its {kind.lower()}s: {'; '.join(known) or 'none'})"
            )
            return m.group(0)
        label = index[(key, kind.lower(), title)]
        if not label:
            problems.append(f"{m.group(0)!r}: the statement has no :label: in book/{key}/")
            return m.group(0)
        return f"[*{kind}: {title}*]({label})"

    out = REF.sub(sub, source)
    for m in re.finditer(r".{0,40}\[book: [^\]\n]*\]", out):
        if not REF.search(m.group(0)) and m.group(0) not in " ".join(problems):
            problems.append(f"{m.group(0)!r}: a [book: ...] reference must follow *Kind: Title*")
    if problems:
        raise BookRefError(
            f"{where + ': ' if where else ''}unknown book reference(s): " + "; ".join(problems)
        )
    return out

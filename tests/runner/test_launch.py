"""One click to a running notebook: the Colab and Binder links of the executed pages, the
install cell of the templates, and where a notebook writes when the package is installed
without a checkout.  (The whole path -- a wheel in a clean virtual environment, one notebook
per paper run by papermill in an empty folder -- is ``tests/test_wheel_notebooks.py``, slow.)
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest
import yaml
from matplotlib import pyplot as plt

from ntpcore import install
from ntpcore.core import paths
from ntpcore.figure import provenance
from ntpcore.figure.claims import Ledger, at_most
from ntpcore.runner import launch
from ntpcore.runner.registry import load_registry

ROOT = paths.ROOT
REPO = launch.Repository("https://github.com/someone/some-book", "main")


# ------------------------------------------------------------------------- the links
def test_the_links_open_the_template_at_the_branch():
    nb = "notebooks/lin_toy.ipynb"
    colab = urlsplit(launch.colab_url(REPO, nb))
    assert (colab.scheme, colab.netloc) == ("https", "colab.research.google.com")
    assert colab.path == "/github/someone/some-book/blob/main/notebooks/lin_toy.ipynb"
    binder = urlsplit(launch.binder_url(REPO, nb))
    assert (binder.scheme, binder.netloc, binder.path) == (
        "https",
        "mybinder.org",
        "/v2/gh/someone/some-book/main",
    )
    assert parse_qs(binder.query) == {"labpath": [nb]}


@pytest.mark.parametrize(
    ("url", "branch"),
    [
        ("https://gitlab.com/someone/some-book", "main"),
        ("https://github.com/someone", "main"),
        ("http://github.com/someone/some-book", "main"),
        ("https://github.com/someone/some-book", ""),
        ("https://github.com/someone/some-book", "a branch"),
    ],
)
def test_a_repository_colab_and_binder_cannot_open_is_refused(url, branch):
    with pytest.raises(launch.LaunchError):
        launch.Repository(url, branch)


@pytest.mark.parametrize("path", ["/abs/x.ipynb", "../x.ipynb", "notebooks/x.py"])
def test_a_link_is_only_to_a_notebook_inside_the_repository(path):
    with pytest.raises(launch.LaunchError):
        launch.colab_url(REPO, path)


def test_the_configured_repository_names_its_trailing_git_and_slash_away():
    assert launch.Repository("https://github.com/a/b.git", "dev").name == "b"
    assert launch.Repository("https://github.com/a/b/", "dev").name == "b"


def test_every_registered_figure_links_to_a_tracked_template():
    """The links point at the repository: a notebook that git does not track would be a
    404 on Colab and Binder."""
    git = subprocess.run(
        ["git", "ls-files", "notebooks"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    tracked = set(git.stdout.split())
    repo = launch.repository()
    for fig_id, entry in load_registry().items():
        assert entry.notebook in tracked, f"{fig_id}: {entry.notebook} is not tracked"
        labpath = parse_qs(urlsplit(launch.binder_url(repo, entry.notebook)).query)["labpath"]
        assert labpath == [entry.notebook]
        assert unquote(launch.colab_url(repo, entry.notebook)).endswith(
            f"/blob/{repo.branch}/{entry.notebook}"
        )


# ------------------------------------------------------------------------- the book's pages
def _ntpbook():
    spec = importlib.util.spec_from_file_location("ntpbook", ROOT / "book" / "_ext" / "ntpbook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(tmp_path: Path, docs: dict[str, str], theme_options: dict) -> tuple[dict, str]:
    """A small Sphinx build with the book's extension: the pseudo-XML of each page and the
    warnings."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    for name, text in {"index": "Index\n=====\n", **docs}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / f"{name}.rst").write_text(text)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        f"extensions = ['ntpbook']\nhtml_theme_options = {theme_options!r}\n"
    )
    warnings = io.StringIO()
    app = Sphinx(
        str(src),
        str(src),
        str(tmp_path / "out"),
        str(tmp_path / "doctrees"),
        "pseudoxml",
        status=None,
        warning=warnings,
        freshenv=True,
    )
    app.build()
    pages = {name: (tmp_path / "out" / f"{name}.pseudoxml").read_text() for name in docs}
    return pages, warnings.getvalue()


def test_an_executed_page_links_to_its_template_on_colab_and_binder(tmp_path):
    fig_id, entry = next(iter(load_registry().items()))
    page = f"book/executed/{fig_id}"
    options = {"repository_url": REPO.url, "repository_branch": REPO.branch}
    pages, warnings = _build(
        tmp_path,
        {page: "The title\n=========\n\nFirst paragraph.\n", "book/other": "Other\n=====\n"},
        options,
    )
    text = pages[page]
    assert f'refuri="{launch.colab_url(REPO, entry.notebook)}"' in text
    assert f'refuri="{launch.binder_url(REPO, entry.notebook)}"' in text
    # under the title, before the page's own first paragraph
    assert text.index("The title") < text.index("ntp-launch") < text.index("First paragraph")
    assert "colab" not in pages["book/other"] and "ntp-launch" not in pages["book/other"]
    assert "Colab/Binder" not in warnings


def test_without_a_usable_repository_the_build_warns(tmp_path):
    fig_id = next(iter(load_registry()))
    page = f"book/executed/{fig_id}"
    pages, warnings = _build(tmp_path, {page: "T\n=\n\nx\n"}, {"repository_url": ""})
    assert "no Colab/Binder links" in warnings
    assert "ntp-launch" not in pages[page]


def test_the_book_reads_the_repository_the_install_cell_uses():
    """One place: the theme options Jupyter Book makes of _config.yml, and
    :func:`launch.repository`, read the same ``repository:`` section."""
    from jupyter_book.config import get_final_config

    config, *_ = get_final_config(
        user_yaml=ROOT / "_config.yml", cli_config={"latex_individualpages": False}, sourcedir=ROOT
    )
    options = config["html_theme_options"]
    repo = launch.repository()
    assert (options["repository_url"], options["repository_branch"]) == (repo.url, repo.branch)
    assert _ntpbook().launch_paragraph("notebooks/x.ipynb", repo).astext().startswith("Run")


# ------------------------------------------------------------------------- the install cell
def test_every_template_has_the_current_install_cell_after_its_title():
    assert launch.sync() == [], "run: python -m ntpcore.runner.launch --write"
    cell = launch.install_cell()
    repo = launch.repository()
    assert f'"ntpcore @ git+{repo.url}@{repo.branch}"' in cell
    assert len(cell.splitlines()) <= 6  # a few lines: the steps are ntpcore.install's
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        assert nb.cells[1].source == cell, nb_path.name
        assert nb.cells[1].metadata["tags"] == ["remove-cell", launch.INSTALL_TAG]


def test_sync_inserts_the_cell_once_after_the_title_and_numbers_the_cells(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("x = 1")]
    for k, c in enumerate(nb.cells):
        c["id"] = str(k)
    path = tmp_path / "lin_x.ipynb"
    path.write_text(nbformat.writes(nb) + "\n")
    assert launch.sync(notebook_dir=tmp_path, source="pass") == [path]
    assert launch.sync(write=True, notebook_dir=tmp_path, source="pass") == [path]
    assert launch.sync(notebook_dir=tmp_path, source="pass") == []
    out = nbformat.read(path, as_version=4)
    assert [c.source for c in out.cells] == ["# T", "pass", "x = 1"]
    assert [c["id"] for c in out.cells] == ["0", "1", "2"]
    # a changed cell is replaced, not added
    assert launch.sync(write=True, notebook_dir=tmp_path, source="pass  # new") == [path]
    assert [c.source for c in nbformat.read(path, as_version=4).cells] == [
        "# T",
        "pass  # new",
        "x = 1",
    ]


def test_the_cell_installs_the_package_then_cpu_torch_at_its_pin_then_the_rest(tmp_path):
    """Run where ntpcore cannot be imported (``-S``: no site-packages), with a stand-in pip
    that records its arguments and, for the package, makes it importable with its metadata:
    the package alone from the configured repository, then torch from the CPU index of
    environment.yml at the pin of pyproject.toml, then the package's other requirements."""
    calls = _run_cell(tmp_path, importable=False)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    index = next(x.split()[1] for x in pip_section if x.startswith("--extra-index-url"))
    torch = next(x for x in pip_section if x.startswith("torch=="))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    repo = launch.repository()
    assert index == install.CPU_INDEX and torch in deps
    assert calls == [
        ["install", "--quiet", "--no-deps", "--ignore-requires-python",
         f"ntpcore @ git+{repo.url}@{repo.branch}"],
        ["install", "--quiet", torch, "--index-url", index],
        ["install", "--quiet", "--ignore-requires-python", *[d for d in deps if d != torch]],
    ]  # fmt: skip


def test_the_cell_does_nothing_where_the_package_imports(tmp_path):
    assert _run_cell(tmp_path, importable=True) == []


def _run_cell(tmp_path: Path, importable: bool) -> list[list[str]]:
    stub = tmp_path / "stub" / "pip"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    log = tmp_path / "pip.jsonl"
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    metadata = (
        "Metadata-Version: 2.1\nName: ntpcore\nVersion: 0.1.0\n"
        + "".join(f"Requires-Dist: {d}\n" for d in deps)
        + 'Requires-Dist: pytest>=9.0; extra == "test"\n'
    )
    (stub / "__main__.py").write_text(
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as fh:\n"
        "    fh.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if '--no-deps' in sys.argv:  # the package: importable, with its metadata\n"
        f"    os.symlink({str(ROOT / 'ntpcore')!r}, {str(tmp_path / 'stub' / 'ntpcore')!r})\n"
        f"    info = {str(tmp_path / 'stub' / 'ntpcore-0.1.0.dist-info')!r}\n"
        "    os.mkdir(info)\n"
        f"    open(os.path.join(info, 'METADATA'), 'w').write({metadata!r})\n"
    )
    pythonpath = [str(tmp_path / "stub")] + ([str(ROOT)] if importable else [])
    env = {"PYTHONPATH": ":".join(pythonpath), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, *([] if importable else ["-S"]), "-c", launch.install_cell()]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    if importable:
        assert done.stdout == ""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_kernel_that_imported_an_older_dependency_is_told_to_restart(monkeypatch):
    """After the install, a module the kernel had already imported at another version than
    the installed one (Colab's numpy, say) would be used stale: restart."""
    import types

    monkeypatch.setitem(sys.modules, "numpy", types.SimpleNamespace(__version__="0.0.1"))
    assert install.stale_modules(["numpy>=2.4", "not-imported-anywhere>=1"]) == ["numpy"]
    monkeypatch.setattr(install, "requirements", lambda dist: ["numpy>=2.4"])
    calls = []
    with pytest.raises(RuntimeError, match="restart"):
        install.install_dependencies(run=calls.append)
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet",
                      "--ignore-requires-python", "numpy>=2.4"]]  # fmt: skip


def test_the_requirements_are_the_runtime_ones():
    reqs = install.requirements()
    names = {install.requirement_name(r) for r in reqs}
    assert "torch" in names and "numpy" in names
    assert not names & {"papermill", "pytest", "jupyter-book"}  # extras are left out


# ------------------------------------------------------------------------- installed, no checkout
def test_this_tree_is_a_checkout():
    assert paths.CHECKOUT and paths.REGISTRY.is_file()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package as a wheel install sees itself: no registry beside it; the kernel runs in
    the notebook's folder."""
    monkeypatch.setattr(paths, "CHECKOUT", False)
    for var in ("NTP_FIGURE_DIR", "NTP_CACHE_DIR", "NTP_EXECUTED_DIR"):
        monkeypatch.delenv(var, raising=False)
    folder = tmp_path / "my-notebooks"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_installed_outputs_and_cache_go_beside_the_notebook(installed, monkeypatch):
    assert paths.explore_dir("lin-x") == installed / "ntp-outputs" / "lin-x"
    assert paths.output_dir("lin-x") == installed / "ntp-outputs" / "lin-x"
    assert paths.cache_dir() == installed / "ntp-outputs" / "cache"
    monkeypatch.setenv("NTP_CACHE_DIR", "elsewhere")  # relative: from the working directory
    assert paths.cache_dir() == installed / "elsewhere"


def test_an_installed_run_writes_beside_the_notebook_and_says_so(installed, capsys):
    ledger = Ledger("lin-x", "quick")
    ledger.check("small", "a small number", 0.1, at_most(1.0), source="[lin, Thm. 1]")
    side = provenance.savefig(plt.figure(), "lin-x", {}, profile="quick", claims=ledger)
    out = installed / "ntp-outputs" / "lin-x"
    names = {"lin-x.png", "lin-x.json", "lin-x.data.json", "lin-x.claims.json"}  # quick: no PDF
    assert {p.name for p in out.iterdir()} == names
    assert side["git"] == {"commit": None, "dirty": None}  # no checkout: no repository state
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("Exploration")]
    assert len(lines) == 1 and f"{out}/" in lines[0] and "installed, no checkout" in lines[0]
    assert not (ROOT / "results" / "explore" / "lin-x").exists()


def test_installed_the_runner_says_it_needs_a_checkout(installed, monkeypatch):
    from ntpcore.runner import registry

    monkeypatch.setattr(paths, "REGISTRY", installed / "figures.yml")
    with pytest.raises(registry.RegistryError, match="need a checkout"):
        registry.load_registry()


def test_in_a_checkout_a_run_by_hand_still_goes_to_the_explore_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("NTP_FIGURE_DIR", raising=False)
    monkeypatch.delenv("NTP_CACHE_DIR", raising=False)
    monkeypatch.setattr(paths, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    assert paths.explore_dir("lin-x") == tmp_path / "results" / "explore" / "lin-x"
    assert paths.cache_dir() == tmp_path / "results" / "cache"
    assert provenance.git_state()["commit"]  # the checkout's commit


def test_the_launch_paragraph_says_which_overrides_make_the_pages_figure():
    """A template serves several figures: its defaults make one, and the page of another says
    what to set in the parameters cell (as the cell writes it)."""
    repo = launch.Repository("https://github.com/someone/some-book", "main")
    ntpbook = _ntpbook()
    text = ntpbook.launch_paragraph("notebooks/x.ipynb", repo).astext()
    assert "Its defaults make this figure" in text
    params = {"view": "grid", "dataset": "text", "models": ["transformer", "ufm"], "lr": 0.1}
    text = ntpbook.launch_paragraph("notebooks/x.ipynb", repo, params).astext()
    assert (
        'set view = "grid", dataset = "text", models = ["transformer", "ufm"], lr = 0.1 in its '
        "parameters cell"
    ) in text
    assert "Its defaults make this figure" not in text

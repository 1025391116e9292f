"""nbval on notebooks that were already executed: a pytest plugin that replays outputs.

``make test`` executes every registered notebook once, through the runner (papermill, the
quick profile, the claims checked).  nbval then compares those executed copies with the
golden outputs -- without executing them again.  nbval normally starts a kernel per
notebook and sends it every code cell; with this plugin
(``pytest -p tools.qa.nbval_replay --nbval-replay DIR ...``) the "kernel" of a notebook is a
:class:`ReplayKernel` that answers each cell with the outputs the same cell produced in the
executed copy ``DIR/<name>.ipynb``, as the messages a kernel sends (status busy, the cell's
input, its streams, displays, results and errors, status idle).  Everything else is
nbval's: which cells it compares (``--nbval-lax`` with the ``nbval-check-output`` tag),
the sanitising, the comparison and its report, which names the cell and the line.

The notebooks nbval reads (the *reference*: the executed copies with the golden text in
their tagged cells, :func:`tools.qa.golden.inject_all`) and the replayed ones must hold
the same code cells in the same order: a cell whose source differs is an error, not a
comparison of unrelated outputs.
"""

from __future__ import annotations

import itertools
from collections import deque
from pathlib import Path
from queue import Empty
from typing import Any

import nbformat
import pytest

_IDS = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--nbval-replay",
        metavar="DIR",
        default=None,
        help="answer every cell with the outputs of the executed copy DIR/<notebook name> "
        "instead of executing it in a kernel",
    )


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("--nbval-replay")
    if folder is None:
        return
    folder = Path(folder)
    if not folder.is_dir():
        raise pytest.UsageError(f"--nbval-replay: {folder} is not a folder")
    from nbval import plugin

    def setup(self) -> None:  # replaces IPyNbFile.setup: no kernel is started
        self.kernel = ReplayKernel(folder / Path(str(self.fspath)).name)
        self.setup_sanitize_files()

    plugin.IPyNbFile.setup = setup


class ReplayKernel:
    """The part of :class:`nbval.kernel.RunningKernel` that nbval's cells use, answered from
    an executed notebook instead of a live kernel."""

    def __init__(self, executed: Path) -> None:
        if not executed.exists():
            raise FileNotFoundError(f"no executed copy to replay: {executed}")
        nb = nbformat.read(executed, as_version=4)
        self.path = executed
        self._cells = deque(c for c in nb.cells if c.cell_type == "code")
        self._iopub: deque[dict[str, Any]] = deque()
        self._alive = True

    # nbval's calls ------------------------------------------------------------------
    def execute_cell_input(self, cell_input: str, allow_stdin: bool | None = None) -> str:
        del allow_stdin
        if not self._cells:
            raise RuntimeError(f"{self.path}: more cells asked for than the executed copy has")
        cell = self._cells.popleft()
        if cell.source != cell_input:
            raise RuntimeError(
                f"{self.path}: the cell asked for is not the executed copy's next cell "
                f"(sources differ: {cell_input[:60]!r} vs {cell.source[:60]!r})"
            )
        msg_id = f"replay-{next(_IDS)}"
        self._send(msg_id, "status", {"execution_state": "busy"})
        self._send(
            msg_id, "execute_input", {"code": cell.source, "execution_count": cell.execution_count}
        )
        for out in cell.get("outputs", []):
            kind = out.output_type
            if kind == "stream":
                content = {"name": out.name, "text": out.text}
            elif kind in ("display_data", "execute_result"):
                content = {"data": dict(out.data), "metadata": dict(out.get("metadata", {}))}
                if kind == "execute_result":
                    content["execution_count"] = out.get("execution_count")
            elif kind == "error":
                content = {"ename": out.ename, "evalue": out.evalue, "traceback": out.traceback}
            else:  # pragma: no cover - nbformat knows no other output type
                raise RuntimeError(f"{self.path}: unknown output type {kind!r}")
            self._send(msg_id, kind, content)
        self._send(msg_id, "status", {"execution_state": "idle"})
        return msg_id

    def await_reply(self, msg_id: str, timeout: float | None = None) -> dict[str, Any]:
        del timeout
        return {"parent_header": {"msg_id": msg_id}, "content": {"status": "ok"}}

    def await_idle(self, parent_id: str, timeout: float) -> None:
        del parent_id, timeout
        self._iopub.clear()

    def get_message(self, stream: str, timeout: float | None = None) -> dict[str, Any]:
        del stream, timeout
        if not self._iopub:
            raise Empty
        return self._iopub.popleft()

    def is_alive(self) -> bool:
        return self._alive

    def interrupt(self) -> None:
        pass

    def stop(self) -> None:
        self._alive = False

    # ----------------------------------------------------------------------------------
    def _send(self, msg_id: str, msg_type: str, content: dict[str, Any]) -> None:
        self._iopub.append(
            {"msg_type": msg_type, "parent_header": {"msg_id": msg_id}, "content": content}
        )

"""A throw-away notebook for the pipeline tests: a tagged parameters cell and one code cell."""

from __future__ import annotations

from pathlib import Path

import nbformat


def write_notebook(path: Path, params_src: str, body: str = "") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    params = nbformat.v4.new_code_cell(params_src)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nbformat.write(nb, path)
    return path

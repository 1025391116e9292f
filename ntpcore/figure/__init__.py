"""The figure API: what a notebook needs to make one of the book's figures.

``claims`` (the ledger of the paper's statements a figure checks), ``from_params`` (the
experiment's configuration built from the notebook's parameters,
:func:`ntpcore.core.params.from_params`), ``plotting`` (the project's style and colours),
``provenance`` (``savefig``: the PNG, its sidecar and the data
it plots), ``sourcedata`` (the plotted data read back from the figure).  Imports nothing of
the runner or of the QA tooling.
"""

from ntpcore.core.params import from_params  # a notebook's configuration from its parameters

__all__ = ["from_params"]

"""The runner (checkout only): ``python -m ntpcore.reproduce`` executes the notebooks of the
registry (``figures.yml``) with papermill and publishes their figures.

A layer apart from the science: its dependencies (papermill, nbformat, ipykernel, dask's
distributed scheduler) are the ``runner`` extra of the package, and no module of
``ntpcore.core``, ``ntpcore.lin``, ``ntpcore.geo``, ``ntpcore.att`` or ``ntpcore.figure``
imports it.  ``registry`` (the figures and their parameters), ``planning`` (which figures,
with which parameters, in which order), ``staging`` (one notebook in a private folder, then
published all at once or kept), ``runner`` (local workers) and ``cluster`` (a dask cluster),
``launch`` (Colab and Binder links), ``bookrefs`` (a notebook's names of the book's
statements, made links).
"""

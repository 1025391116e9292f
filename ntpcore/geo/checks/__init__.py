"""The checks of the geometry paper's statements (key ``geo``), one function per statement,
each recording its claims on a figure's ledger (:class:`ntpcore.figure.claims.Ledger`):
``convex`` (the max-margin logits L^mm, L^in, the regularization path, the proxy S~, the
datasets), ``training`` (trained UFM, transformer and LSTM: logits and embeddings against
the L^mm geometry) and ``hand`` (the book's worked example: its closed forms by hand against
the solvers, and the regularization path's subspace collapse).  A notebook imports the
module it needs (``from ntpcore.geo.checks import hand``; the package imports none of them,
so that importing one does not load the others) and calls the check of each statement it
illustrates in one line.
"""

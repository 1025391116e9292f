"""The checks of the geometry paper's statements (key ``geo``), one function per statement,
each recording its claims on a figure's ledger (:class:`ntpcore.figure.claims.Ledger`):
``convex`` (the max-margin logits L^mm, L^in, the regularization path, the proxy S~, the
datasets) and ``training`` (trained UFM, transformer and LSTM: logits and embeddings against
the L^mm geometry).  A notebook calls the check of each statement it illustrates in one line.
"""

"""ntpcore: models and solvers for the NTP companion book.

The three papers share one mathematical shape: gradient descent on next-token prediction
splits the parameters into a *finite* part on a data subspace (matching in-support
log-odds) and a part that diverges in norm along a max-margin direction fixed only by the
support pattern of the data.  The package is laid out like the book::

    ntpcore/
      core/       what the papers share, defined once: logits (supports, entropy, CE,
                  CE - H and its gradient), metrics (cos/corr), optim (GD/NGD/Adam and the
                  recording schedule), validate, io (atomic writes)
      lin/        fixed context embeddings (key lin): NTP-SVM, W*, regularization path
      geo/        unconstrained features (key geo): nuclear-norm SVM, L^in, UFM/transformer/LSTM
      att/        one self-attention layer (key att): token-priority graphs, Graph-SVM, W^fin
      claims.py   the claims ledger: every claim a figure illustrates, checked by the run
      pipeline/   registry, runner (python -m ntpcore.reproduce), cache, provenance, sweeps,
                  paths, plotting style
      bench/      make bench: the solvers and trainers against generic references
      errors.py   every typed error

Each paper room imports ``core`` (and the pipeline for caching and plotting), never another
paper's room; its ``__init__`` is the paper's public face.
"""

__version__ = "0.1.0"

"""ntpcore: models and solvers for the NTP companion book.

The three papers share one mathematical shape: gradient descent on next-token prediction
splits the parameters into a *finite* part on a data subspace (matching in-support
log-odds) and a part that diverges in norm along a max-margin direction fixed only by the
support pattern of the data.  The package is laid out like the book, in layers; a module
imports only from its own layer or below (``tests/test_package.py`` checks it)::

    ntpcore/
      errors.py    every typed error                                              (layer 0)
      core/        what the papers share, defined once: logits (supports, entropy, CE,
                   CE - H and its gradient, the in-support projection), metrics (cos),
                   optim (GD/NGD/Adam, the recording schedule), validate, io (atomic
                   writes), cache (computations keyed on their inputs), sweep (independent
                   runs, in order), paths                                           (1)
      figure/      what a figure's notebook needs: claims (the ledger of the statements
                   it checks), provenance (savefig: PNG, sidecar, plotted data),
                   sourcedata, plotting (style and colours)                         (2)
      lin/ geo/ att/   one room per paper (keys lin, geo, att), each laid out alike:  (3)
                   the mathematics in modules of their own, a face (__init__) that
                   re-exports it, an experiments/ package (one module per figure
                   family), and plots
        lin/       fixed context embeddings: NTP-SVM (svm_problem, svm, dual, dual_cd,
                   svm_reference), W* (subspace), separability, regularization path
        geo/       unconstrained features: nuclear-norm SVM (svm_problem, svm,
                   svm_scale), L^in (logits), embeddings' geometry, datasets and corpora, models
                   (UFM, transformer, LSTM) and their trainers (train/: protocol,
                   numpy_ufm, torch_nets, ridge)
        att/       one self-attention layer: token-priority graphs (priority), Graph-SVM
                   (svm), W^fin (finite), losses and gradients (dynamics), descent loops
                   (descent), automaton, regularization path
      runner/      the checkout's notebook runner (python -m ntpcore.reproduce): registry
                   (figures.yml), planning, staging, runner, cluster, launch, bookrefs;
                   its dependencies are the ``runner`` extra                        (4)
      reproduce.py the command line of the runner                                   (5)

The golden outputs, the reproducibility configurations, the mutation tooling and the
benchmarks are not in the package: they live in the checkout's ``tools/``, beside the tests
they serve.  No paper's room imports another's, and no module of a paper imports its own
face: each imports what it uses from the module that defines it.
"""

__version__ = "0.1.0"

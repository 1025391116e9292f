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

Vocabulary
----------
One word per quantity, in the three papers' configurations and the notebooks' parameters
(the book's *Notation and correspondences* page uses the same names;
``tests/test_vocabulary.py`` reads this table and checks every configuration field and
every notebook parameter against it)::

    name        symbol   quantity                                          never
    ----------  -------  ------------------------------------------------  ---------------------
    dim         d        embedding dimension (decoder, UFM, network width)  d, embedding_dim
    vocab_size  V, K     vocabulary size (att writes K)                     V, K
    n_contexts  m        distinct contexts                                  m
    n_samples   n        sequences (samples) per dataset                    n
    seq_len     T        tokens per sequence                                T
    lr          eta      step size / learning rate of every optimiser       step_size, eta
    n_steps     -        optimiser steps                                    n_epochs, epochs
    data_seed   -        seed of the data draw                              seed
    init_seed   -        seed of the initialisation (weights, models)       seed
    trial_seed  -        base seed of independent trials                    seed
    first_seed  -        first of n_seeds draws (lin: data and init seed)   seed

* ``lr`` per optimiser where a figure runs several: ``gd_lr``, ``ngd_lr``, ``adam_lr``;
  ``n_steps`` counts optimiser steps: a full-batch epoch is one step, and the geometry
  paper, which trains full batch, counts epochs (its records keep the word ``epoch``).
* Seeds: ``data_seed`` draws the data (lin's synthetic set and toy probabilities, geo's
  datasets), ``init_seed`` the initialisation (lin's W_0, geo's models and the factors of
  its regularization path, att's trained models in the conceptual figure and the
  playground), ``trial_seed`` independent trials -- trial r uses
  ``SeedSequence(trial_seed).spawn(n_trials)[r]`` (att's trials, geo's random supports, lin's
  phase-diagram instances, att's SCC statistics) -- and lin's ``first_seed`` the first of
  the draws of a spread.  No configuration has a bare ``seed``.
* The training protocols, named by what they hold: lin's ``InitAndRecording`` (W_0's law
  and seed, the steps, the records), geo's ``AdamWProtocol`` (the paper's full-batch AdamW
  schedule), att's ``DescentSteps`` (learning rate and number of steps).
* Maths-level signatures keep the papers' symbols: ``eta`` in :func:`ntpcore.lin.train`,
  :func:`ntpcore.lin.train_ntp` and :func:`ntpcore.att.run_descent`; ``m, d, V, S, seed`` in
  the data generators (:func:`ntpcore.lin.make_synthetic`); ``W``, ``H``, ``L``, ``P``,
  ``pi``, ``E`` for the arrays.
* The faces (``ntpcore.lin``, ``.geo``, ``.att``) share names with one contract: ``ce``,
  ``ce_grad``, ``ce_excess``, ``project_F`` and ``entropy`` take logits ``L`` and are
  :mod:`ntpcore.core.logits`'s on every face; lin's weight-space forms carry ``_W``
  (``ce_W(W, H, P, pi)`` is ``ce(W @ H, P, pi)``; ``ce_grad_W``, ``ce_excess_W``,
  ``project_F_W``, ``project_perp_W``).  Solvers: ``solve_<problem>`` returns a result
  object (``solve_ntp_svm``, ``solve_nuclear_svm``, ``solve_graph_svm``,
  ``solve_max_margin``), ``<problem>`` the array (``ntp_svm``, ``nuclear_svm``,
  ``graph_svm``), ``<problem>_cvxpy`` the generic cvxpy reference (``ntp_svm_cvxpy``,
  ``nuclear_svm_cvxpy``, ``graph_svm_cvxpy``, ``finite_component_cvxpy``); each paper's
  ``regularization_path`` and ``regularization_path_cvxpy`` return the path as a dict.
* The notebooks' profiles are :data:`ntpcore.core.params.PROFILES`, defined once.
* ``view``: which kind of figure a template that draws several draws (geo's trained
  models, att's global convergence, lin's toy); a notebook's own parameter, in no
  configuration.
"""

__version__ = "0.1.0"

"""Quality tooling of the checkout: the golden outputs (``golden``, ``printed``,
``golden_update``), the baseline images (``images``), the floating-point configurations
(``reproducibility``), the mutation catalogue (``mutations``), the code-level mutants
(``mutants``), the catalogue's kernels forked from a warm process (``zygote``), nbval on
executed notebooks (``nbval_replay``) and the adoption of a finished run (``adopt``).
Reads ``tests/``; not part of the ``ntpcore`` wheel."""

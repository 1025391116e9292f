"""Quality tooling of the checkout: the golden outputs (``golden``, ``printed``,
``golden_update``), the baseline images (``images``), the floating-point configurations
(``reproducibility``), the mutation catalogue (``mutations``) and the code-level mutation
score (``mutmut_score``).  Reads ``tests/``; not part of the ``ntpcore`` wheel."""

"""Checkout-only tooling beside the tests it serves: ``qa`` (goldens, baseline images,
reproducibility across floating-point paths, mutations) and ``bench`` (``make bench``).
Not part of the ``ntpcore`` wheel."""

"""Shared pytest set-up: a non-interactive matplotlib backend for the test process only."""

import matplotlib

matplotlib.use("Agg")

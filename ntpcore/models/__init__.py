"""Torch models (kept import-light: import the submodule you need)."""

"""Cached experiment functions called by the notebooks, one module per paper."""

"""Torch models (kept import-light: import the submodule you need).

- :mod:`ntpcore.models.ufm` -- NTP unconstrained-features model (``geo``, §1.3)
- :mod:`ntpcore.models.transformer` -- 4-layer causal transformer without positional
  encoding, with prefix sharing (:class:`~ntpcore.models.transformer.PrefixTrie`)
- :mod:`ntpcore.models.lstm` -- 2-layer LSTM language model
- :mod:`ntpcore.models.attention` -- one-layer self-attention (``att``)
"""

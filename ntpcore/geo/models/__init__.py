r"""The geometry paper's models [geo, Sec. 3]: maps from the :math:`m` distinct contexts to
context embeddings :math:`H\in\mathbb R^{d\times m}`, followed by an output layer whose
weight is the word-embedding matrix :math:`W\in\mathbb R^{V\times d}`, so that the logits
are :math:`L=WH` (plus a bias for the LSTM).

* :mod:`~ntpcore.geo.models.ufm` -- the NTP-UFM, :math:`H` a free parameter
  (book: ``geo-def-ufm``);
* :mod:`~ntpcore.geo.models.transformer` -- a decoder-only transformer without positional
  encoding, :math:`h_j` its last-position output;
* :mod:`~ntpcore.geo.models.lstm` -- a two-layer LSTM, :math:`h_j` its last hidden state.
"""

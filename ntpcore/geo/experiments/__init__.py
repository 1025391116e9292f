r"""Cached experiments of the geometry paper, the functions the ``geo_*`` notebooks call.

* :mod:`~ntpcore.geo.experiments.data` -- the two datasets by name
  (:class:`~ntpcore.geo.experiments.data.DataConfig`, one loader);
* :mod:`~ntpcore.geo.experiments.convex` -- the convex side in logit space: :math:`L^{in}`,
  the nuclear-norm NTP-SVM :math:`L^{mm}` and its proxy :math:`\tilde S`, the
  regularization path of :math:`\mathrm{CE}(L)+\lambda\|L\|_*` [geo, Sec. 2, Fig. 1]
  (book: ``geo-def-lin``, ``geo-eq-svm``, ``geo-thm-path``, ``geo-prop-proxy``);
* :mod:`~ntpcore.geo.experiments.training` -- trained UFM, transformer and LSTM, whose
  logits and embeddings approach the :math:`L^{mm}` geometry [geo, Sec. 3, Figs. 1-3].
"""

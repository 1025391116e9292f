"""ntpcore: models and solvers for the NTP companion book.

The three papers share one mathematical shape: gradient descent on next-token prediction
splits the parameters into a *finite* part on a data subspace (matching in-support
log-odds) and a part that diverges in norm along a max-margin direction fixed only by the
support pattern of the data.

- :mod:`ntpcore.linear`    -- fixed context embeddings (key ``lin``)
- :mod:`ntpcore.geometry`  -- unconstrained features, logit space (key ``geo``)
- :mod:`ntpcore.attention` -- one self-attention layer (key ``att``)

Pipeline modules: :mod:`ntpcore.paths`, :mod:`ntpcore.cache`, :mod:`ntpcore.provenance`,
:mod:`ntpcore.plotting`, :mod:`ntpcore.registry`, :mod:`ntpcore.reproduce`.
"""

__version__ = "0.1.0"

"""Typed errors of ntpcore.

Every solver raises one of these instead of returning ``None`` or a partial answer.
They derive from :class:`ValueError` so that generic callers can still catch them.
"""


class NTPError(ValueError):
    """Base class of all ntpcore errors."""


class DataError(NTPError):
    """Input data are malformed (shape, NaN, probabilities not in the simplex, ...)."""


class InfeasibleError(NTPError):
    """A max-margin program is infeasible; the message says which constraint fails."""


class IncompatibleError(NTPError):
    """The in-support (finite-part) equations have no solution."""


class SolverError(NTPError):
    """A numerical solver failed or returned an inaccurate solution."""


class ParameterError(NTPError):
    """A notebook parameter override is unknown, of the wrong type or out of range."""

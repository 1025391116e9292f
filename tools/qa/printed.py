r"""The numbers of a printed line: which are measured results and which are constants, and
the tolerance a measured number gets (the golden outputs, :mod:`tools.qa.golden`).

A number written ``⟦0.0175 ± 0.00069⟧`` in a golden file is a *measured* number, compared
within that absolute tolerance; a number written plainly (a count, a rank, a threshold, a
constant of a statement) must be printed exactly.  In a claim line only our value and a
known deviation's reason (which quotes the run) are measured.  A measured number's tolerance
is :data:`SAFETY` times its spread across floating-point configurations, and never less
than its floor: one unit in the last printed digit, and for a claim's value at least one
unit in its third significant digit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ntpcore.figure.lines import DEVIATION

__all__ = [
    "CLAIM",
    "MARK",
    "NUMBER",
    "SAFETY",
    "GoldenError",
    "Line",
    "Number",
    "fmt_tol",
    "parse_golden_line",
    "plain",
    "segments",
    "suggest_tolerance",
    "tokenize",
]

#: A measured number's tolerance is SAFETY times its spread across the configurations.
SAFETY = 3.0
NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d+|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w)")
MARK = re.compile(r"⟦(\S+) ± (\S+)⟧")
CLAIM = re.compile(
    r"^(?P<head>(?:PASS|FAIL|SKIP|CHECK) \S+: .*?\]: ours )(?P<ours>.*?)"
    r"(?P<tail> \((?:≤|≥|in \[|= |holds).*)$"
)


class GoldenError(RuntimeError):
    """A golden file is missing, malformed or does not fit its notebook."""


@dataclass(frozen=True)
class Number:
    """One number printed in a line.

    ``measured``: a result of the run (compared within a tolerance); otherwise a constant of
    the text (a threshold, a count, a parameter), compared exactly.  ``floor``: the smallest
    tolerance a measured number gets (see the module docstring).  ``tol``: the tolerance
    read from a golden file (``None`` for a run's number or a plain golden number).
    """

    text: str
    measured: bool
    floor: float
    tol: float | None = None

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(frozen=True)
class Line:
    """A printed line: its words (every number replaced by ``#``) and its numbers."""

    words: str
    numbers: tuple[Number, ...]
    claim: str | None = None  # the claim id, for a line printed by the claims ledger


def _last_digit(text: str) -> float:
    """One unit in the last printed digit of ``text`` (``1e-4`` for ``0.0175``)."""
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** (int(exp or 0) - decimals)


def _floor(text: str, claim_value: bool) -> float:
    value = abs(float(text))
    unit = _last_digit(text)
    if value == 0.0:
        return 0.0 if "e" in text.lower() else unit
    if claim_value:  # three significant digits, trailing zeros dropped by the 'g' format
        unit = min(unit, 10.0 ** (math.floor(math.log10(value)) - 2))
    return unit


def _is_integer(text: str) -> bool:
    return "." not in text and "e" not in text.lower()


def _numbers(text: str, measured_segment: bool, claim_value: bool = False) -> list[Number]:
    out = []
    for m in NUMBER.finditer(text):
        t = m.group(0)
        measured = measured_segment and (claim_value or not _is_integer(t))
        out.append(Number(t, measured, _floor(t, claim_value) if measured else 0.0))
    return out


def segments(line: str) -> tuple[list[tuple[str, bool, bool]], str | None]:
    """Split a line into (text, measured segment, claim value) parts, and its claim id.

    In a claim line only the measured value (``ours ...``) and a known deviation's text
    (which quotes the run) are measured; the statement, source, comparison and the paper's
    and reference numbers are constants.  In any other line every number is a result.
    """
    m = CLAIM.match(line)
    if not m:
        return [(line, True, False)], None
    claim = line.split(" ", 2)[1].rstrip(":")
    tail = m.group("tail")
    dev = DEVIATION.search(tail)
    expect = tail[: dev.start()] if dev else tail
    parts = [(m.group("head"), False, False), (m.group("ours"), True, True), (expect, False, False)]
    if dev:
        parts += [(dev.group(0), False, False), (tail[dev.end() :], True, False)]
    return parts, claim


def tokenize(line: str) -> Line:
    """The words and numbers of one printed line of a run."""
    parts, claim = segments(line)
    words, numbers = [], []
    for text, measured, claim_value in parts:
        words.append(NUMBER.sub("#", text))
        numbers += _numbers(text, measured, claim_value)
    return Line("".join(words), tuple(numbers), claim)


def parse_golden_line(line: str) -> Line:
    """A golden line: ``⟦value ± tol⟧`` marks a measured number, plain numbers are exact."""
    words, numbers, pos = [], [], 0
    for m in MARK.finditer(line):
        chunk = line[pos : m.start()]
        words.append(NUMBER.sub("#", chunk))
        numbers += [Number(n.text, False, 0.0) for n in _numbers(chunk, False)]
        value, tol = m.group(1), m.group(2)
        try:
            float(value), float(tol)
        except ValueError as exc:
            raise GoldenError(
                f"bad measured number {m.group(0)!r} in golden line {line!r}"
            ) from exc
        words.append("#")
        numbers.append(Number(value, True, 0.0, float(tol)))
        pos = m.end()
    chunk = line[pos:]
    words.append(NUMBER.sub("#", chunk))
    numbers += [Number(n.text, False, 0.0) for n in _numbers(chunk, False)]
    plain = MARK.sub(lambda m: m.group(1), line)
    return Line("".join(words), tuple(numbers), segments(plain)[1])


def fmt_tol(tol: float) -> str:
    """``tol`` rounded up to two significant digits."""
    if tol <= 0:
        return "0"
    e = math.floor(math.log10(tol)) - 1
    up = math.ceil(tol / 10.0**e - 1e-9) * 10.0**e
    return f"{up:.2g}"


def suggest_tolerance(number: Number, spread: float | None) -> float:
    """``max(SAFETY * spread, floor)`` for a measured number (``spread`` None: not measured)."""
    return max(SAFETY * (spread or 0.0), number.floor)


def plain(line: str) -> str:
    """A golden line as the notebook prints it (the tolerance marks removed)."""
    return MARK.sub(lambda m: m.group(1), line)

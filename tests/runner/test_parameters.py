"""Every parameter of every notebook is checked by the runner before any kernel starts
(issue 32, item 4).

The parameters and their ranges are read from the notebooks' parameters cells (no name is
written here): for each, values just outside its range (below a lower end, above an upper
one, at an open end, a name that is not a choice, an empty list, a file that does not
exist) must be refused by :func:`ntpcore.runner.planning.plan`, which runs before any
kernel.
"""

from __future__ import annotations

import math

import pytest

from ntpcore.errors import ParameterError
from ntpcore.runner import parameters, planning, registry
from ntpcore.runner import runner as reproduce

REG = registry.load_registry()
#: set by the runner itself (--only, --profile): any --set of them is refused
RESERVED = ("fig_id", "profile")


def _bad_values(spec: registry.ParamSpec, params: dict) -> list:
    """Values of ``spec``'s parameter that its range refuses (``params``: the others)."""
    ends = parameters._interval(spec.constraint or "")
    bad: list = []
    if ends is not None:
        closed_lo, lo, hi, closed_hi = ends
        lo = params[lo] if isinstance(lo, str) else lo
        hi = params[hi] if isinstance(hi, str) else hi
        integer = isinstance(spec.default, int) or (
            isinstance(spec.default, list) and spec.default and isinstance(spec.default[0], int)
        )
        step = 1 if integer else abs(lo if math.isfinite(lo) else hi or 1) * 1e-3 + 1e-9
        if math.isfinite(lo):
            bad.append(lo if not closed_lo else lo - step)
        if math.isfinite(hi):
            bad.append(hi if not closed_hi else hi + step)
        if not integer:
            bad.append(math.nan)
        bad = [int(b) if integer else float(b) for b in bad if not (integer and math.isnan(b))]
    elif spec.choices:
        bad.append("" if spec.takes_file("x") else "not-one-of-the-choices")
        if spec.takes_file("x"):
            bad.append("/no/such/file.txt")
    elif (spec.constraint or "").startswith((">", "<")):
        op, bound = spec.constraint[:2].strip("0123456789.-"), spec.constraint.lstrip("<>=")
        bad.append(float(bound) if op in (">", "<") else float(bound) - 1 + 2 * (op == "<="))
    if isinstance(spec.default, list):
        bad = [[b] for b in bad] + ([[]] if spec.default else [])
        if "increasing" in spec.flags and len(spec.default) > 1:
            bad.append(list(reversed(spec.default)))
    return bad


def _cases():
    out = []
    for fig_id, entry in REG.items():
        specs = registry.parse_parameters(entry.notebook_path)
        params = {k: s.default for k, s in specs.items()} | entry.overrides("paper")
        for name, spec in specs.items():
            if name not in RESERVED:
                out.append(pytest.param(fig_id, name, spec, params, id=f"{fig_id}:{name}"))
    return out


CASES = _cases()


def test_every_parameter_of_every_notebook_declares_a_range():
    missing = [
        c.id
        for c in CASES
        if c.values[2].constraint is None or not _bad_values(c.values[2], c.values[3])
    ]
    assert not missing, f"parameters without a range the runner can check: {missing}"


@pytest.mark.parametrize(("fig_id", "name", "spec", "params"), CASES)
def test_a_value_out_of_range_is_refused_before_any_kernel_starts(fig_id, name, spec, params):
    for bad in _bad_values(spec, params):
        with pytest.raises(ParameterError, match=rf"parameter '\w+' \({fig_id}") as info:
            planning.plan([fig_id], "paper", {name: bad}, REG)
        assert name in str(info.value), (bad, str(info.value))


@pytest.mark.parametrize("name", RESERVED)
def test_the_runners_own_parameters_cannot_be_set(name):
    with pytest.raises(ParameterError, match="not allowed"):
        planning.plan([next(iter(REG))], "paper", {name: "x"}, REG)


def test_every_registry_value_and_default_lies_in_its_range():
    for profile in ("paper", "quick"):
        assert len(planning.plan(None, profile, {}, REG)) == len(REG)


@pytest.mark.parametrize("override", ["lr_gamma=-1", "svm_tol=2", "lr=-1"])
def test_the_corpus_scale_figures_training_parameters_are_refused_in_the_runner(
    monkeypatch, capsys, override
):
    """Issue 32: svm_tol=2 and lr=-1 were refused by the notebook 5-8 s later, lr_gamma=-1
    nowhere (the training ascended)."""
    started = []
    monkeypatch.setattr(reproduce, "execute", lambda jobs, n: started.append(jobs) or [])
    assert reproduce.main(["--only", "geo-corpus-scale", "--set", override]) == 2
    name = override.split("=")[0]
    assert f"error: parameter '{name}' (geo-corpus-scale, --set): must lie in (0, " in (
        capsys.readouterr().err
    )
    assert started == []

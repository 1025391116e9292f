"""One name, one meaning: the names the papers' faces (``ntpcore.lin``, ``ntpcore.geo``,
``ntpcore.att``) share follow one contract.

A name two faces share is either one object (the logit-space ``ce``, ``ce_grad``,
``ce_excess``, ``project_F``, ``entropy`` of :mod:`ntpcore.core.logits`, which take logits
``L`` on every face) or, for each paper's own version of one object (its
``regularization_path``, its ``finite_component``), two functions that return the same kind
of value (their return annotations agree), are evaluated at the same kind of point (when
either takes a point -- ``W`` of a decoder, ``L`` of logits -- first, both take the same one:
a weight-space function has its own name, ``ce_W``) and take the arguments they have in
common in the same order: a role they share (``P``, ``S``, ``pi``, ...) has one name and one
place relative to the others.
"""

from __future__ import annotations

import inspect
import itertools

import pytest

from ntpcore import att, geo, lin

FACES = {"lin": lin, "geo": geo, "att": att}


def _shared():
    out = []
    for (na, a), (nb, b) in itertools.combinations(FACES.items(), 2):
        for name in sorted(set(a.__all__) & set(b.__all__)):
            fa, fb = getattr(a, name), getattr(b, name)
            if fa is not fb and callable(fa) and callable(fb) and not isinstance(fa, type):
                out.append((name, na, fa, nb, fb))
    return out


def _contract(f):
    sig = inspect.signature(f, eval_str=True)
    params = [p.name for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    return params, sig.return_annotation


SHARED = _shared()
#: the first argument of a function evaluated at a point: a decoder's weights, logits
POINTS = {"W", "L"}
LOGITS = ("ce", "ce_grad", "ce_excess", "project_F", "entropy")


def test_the_faces_share_names_worth_checking():
    assert {"regularization_path", "regularization_path_cvxpy"} <= {s[0] for s in SHARED}


@pytest.mark.parametrize("name", LOGITS)
def test_the_logit_space_names_are_one_object_on_the_faces_that_have_them(name):
    from ntpcore.core import logits

    faces = [f for f in FACES.values() if name in f.__all__]
    assert len(faces) >= 2, name
    assert all(getattr(f, name) is getattr(logits, name) for f in faces)
    assert next(iter(inspect.signature(getattr(logits, name)).parameters)) in {"L", "P"}


@pytest.mark.parametrize(("name", "na", "fa", "nb", "fb"), SHARED, ids=[s[0] for s in SHARED])
def test_a_shared_name_has_one_contract(name, na, fa, nb, fb):
    (pa, ra), (pb, rb) = _contract(fa), _contract(fb)
    assert ra == rb, f"{name}: {na} returns {ra}, {nb} returns {rb}"
    if {pa[0], pb[0]} & POINTS:
        assert pa[0] == pb[0], f"{name}: {na} is evaluated at {pa[0]}, {nb} at {pb[0]}"
    common = [p for p in pa[1:] if p in pb[1:]]
    assert common == [p for p in pb[1:] if p in pa[1:]], (
        f"{name}: the shared arguments come in another order ({na}: {pa}, {nb}: {pb})"
    )

"""One name, one meaning: the names the papers' faces (``ntpcore.lin``, ``ntpcore.geo``,
``ntpcore.att``) share follow one contract.

For every public name two faces both define (a function, not the same object re-exported),
the two functions return the same kind of value (their return annotations agree) and take
the arguments they have in common in the same order: the first argument is the point the
function is evaluated at (``W`` of a decoder, ``L`` of logits, ...), and a role they share
(``P``, ``S``, ``pi``, ...) has one name and one place relative to the others.
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


def test_the_faces_share_names_worth_checking():
    names = {s[0] for s in SHARED}
    assert {"ce", "ce_excess", "ce_grad", "project_F", "regularization_path"} <= names


@pytest.mark.parametrize(("name", "na", "fa", "nb", "fb"), SHARED, ids=[s[0] for s in SHARED])
def test_a_shared_name_has_one_contract(name, na, fa, nb, fb):
    (pa, ra), (pb, rb) = _contract(fa), _contract(fb)
    assert ra == rb, f"{name}: {na} returns {ra}, {nb} returns {rb}"
    common = [p for p in pa[1:] if p in pb[1:]]
    assert common == [p for p in pb[1:] if p in pa[1:]], (
        f"{name}: the shared arguments come in another order ({na}: {pa}, {nb}: {pb})"
    )

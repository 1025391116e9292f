"""One error contract for the papers' faces (issue 32, items 5 and 6).

Every public function of ``ntpcore.lin``, ``ntpcore.geo`` and ``ntpcore.att`` refuses a bad
argument with the package's typed errors (:class:`ntpcore.errors.NTPError`:
``ParameterError``, ``DataError``, ...): never a bare numpy, cvxpy or ``int()`` error, and
never a silent result (a NaN, an ascending trajectory, a fallback to another solver).

The same table of bad inputs runs over the three faces.  Each public function has a valid
call below (small data); every argument of it is then spoiled, one at a time, in each way
its kind admits:

* a number (int or float): ``nan``, ``inf``, and ``-1`` (unless the argument takes negative
  values, :data:`NEGATIVE_OK`);
* a name (a string): an unknown one;
* an array or a sequence: a ``nan`` entry, an ``inf`` entry, one axis too many (a 2-D
  sequence where a 1-D one is expected; not for the arguments that take stacks,
  :data:`STACKS`) and, for the arguments that hold counts, indices, probabilities, radii or
  steps (:data:`NONNEGATIVE_ARRAYS`), a ``-1`` entry.

Objects (a random generator, graphs, a problem, a callable) are not spoiled.
"""

from __future__ import annotations

import inspect
import math
import signal
import time
import warnings

import numpy as np
import pytest

from ntpcore import att, geo, lin
from ntpcore.errors import DataError, NTPError, ParameterError

FACES = {"lin": lin, "geo": geo, "att": att}

# --------------------------------------------------------------------------- valid calls

_lin = lin.make_synthetic(m=6, d=8, V=4, S=2, seed=0)
H, P, PI = _lin.H, _lin.P, _lin.pi
S = P > 0
W = np.random.default_rng(1).normal(size=(4, 8)) * 0.1
_pair = lin.solution_pair(H, P)
_F = _pair["F"]

_geo = lin.make_synthetic(m=5, d=6, V=4, S=2, seed=3)
GP, GPI = _geo.P, _geo.pi
GS = GP > 0
L = np.random.default_rng(2).normal(size=(4, 5))
L_MM = geo.nuclear_svm(GS)
G_CERT = geo.polar_certificate(GS)
WF, HF = geo.balanced_factors(L)

_att = att.sample_dataset(np.random.default_rng(0), 6, 4, 6, 8, graph="cyclic")
E, TOK, LAB = _att.E, _att.tokens, _att.labels
AW = np.zeros((8, 8))
PROBLEM = att.make_problem(E, TOK, LAB)
GRAPHS = att.token_priority_graphs(TOK, LAB, 6)
STRUCT = att.scc_structures(GRAPHS)
W_SVM = att.graph_svm(E, TOK, LAB)
W_FIN = att.finite_component(E, TOK, LAB)
AUTO = att.build_automaton(E, TOK, LAB, W_svm=W_SVM, W_fin=W_FIN)
ATTN = att.attention_weights(W_SVM * 3, PROBLEM)[0]
SEL, AMB = att.select_tokens(TOK, ATTN, 6)
A_EQ, A_IN, _ = att.graph_svm_constraints(E, GRAPHS)


def rng():
    return np.random.default_rng(0)


#: face -> function name -> (positional arguments, keyword arguments) of a valid call
VALID = {
    "lin": {
        "ce": ((W @ H, P, PI), {}),
        "ce_W": ((W, H, P, PI), {}),
        "ce_F": ((W, H, P, PI), {}),
        "ce_excess": ((W @ H, P, PI), {}),
        "ce_excess_W": ((W, H, P, PI), {}),
        "ce_grad": ((W @ H, P, PI), {}),
        "ce_grad_W": ((W, H, P, PI), {}),
        "ce_hessian": ((W, H, P, PI), {}),
        "cos": ((W, W + 1), {}),
        "data_subspace": ((H, S), {"rtol": 1e-10}),
        "entropy": ((P, PI), {}),
        "finite_component": ((H, P), {}),
        "finite_component_info": ((H, P), {}),
        "init_weights": (((4, 8),), {"kind": "lecun", "rng": 0}),
        "is_compatible": ((H, P), {}),
        "is_ntp_separable": ((H, P), {}),
        "kl_terms": ((W, H, P), {}),
        "make_data": ((H, P, PI), {}),
        "make_loss_grad": ((H, P, PI), {}),
        "make_synthetic": (
            (6, 8, 4, 2, 0),
            {"emb": "gauss", "prob": "dirichlet", "alpha": 1.0, "freq": "uniform", "n": 500},
        ),
        "make_toy": (
            (0,),
            {
                "angles_deg": (10.0, 100.0, 260.0),
                "target_entropy": 0.8811,
                "entropy_tol": 0.005,
                "max_draws": 10000,
            },
        ),
        "margins": ((W, H, S), {}),
        "ntp_svm": ((H, P), {"solver": "auto"}),
        "solve_ntp_svm": ((H, S), {"solver": "auto"}),
        "project_F": ((W @ H, S), {}),
        "project_F_W": ((W, H, S), {}),
        "project_perp_W": ((W, H, S), {}),
        "regularization_path": ((H, P, PI, [1.0, 2.0]), {"rtol": 1e-8, "on_fail": "raise"}),
        "regularization_path_cvxpy": ((H, P, PI, [1.0]), {"solver": "CLARABEL"}),
        "ridge_solution": ((H, P, PI, 0.1), {}),
        "row_space_projector": ((H,), {"rtol": 1e-12}),
        "separability_lp": ((H, S), {}),
        "smoothness_bound": ((H, PI), {}),
        "solution_pair": ((H, P), {"solver": "auto"}),
        "toy_embeddings": (((10.0, 100.0, 260.0),), {}),
        "train": (
            (lin.make_loss_grad(H, P, PI), W),
            {
                "optimizer": "adam",
                "eta": 0.1,
                "n_steps": 5,
                "record_steps": [0, 2, 5],
                "betas": (0.9, 0.99),
                "eps": 1e-8,
            },
        ),
        "train_metrics": ((H, P, PI, _pair["W_star"], _pair["W_mm"], _F), {}),
        "train_ntp": (
            (_lin,),
            {
                "optimizer": "gd",
                "eta": 0.5,
                "n_steps": 5,
                "init": "lecun",
                "init_seed": 0,
                "record_steps": [0, 5],
                "betas": (0.9, 0.99),
                "eps": 1e-8,
            },
        ),
    },
    "geo": {
        "balanced_factors": ((L,), {"tol": 1e-6}),
        "ce": ((L, GP, GPI), {}),
        "ce_excess": ((L, GP, GPI), {}),
        "ce_grad": ((L, GP, GPI), {}),
        "centered_support": ((GS,), {}),
        "check_certificate": ((G_CERT["G"] if "G" in G_CERT else L, GS, L_MM), {}),
        "cosine_matrix": ((WF,), {}),
        "direction_distance": ((L, L + 1), {}),
        "dual_certificate_cvxpy": ((GS,), {"solver": "CLARABEL"}),
        "entropy": ((GP, GPI), {}),
        "finite_logits": ((GP,), {}),
        "gram_distance": ((WF, WF + 1), {}),
        "mm_embeddings": ((L_MM,), {"tol": 1e-6}),
        "nuclear_norm": ((L,), {}),
        "nuclear_svm": ((GS,), {"solver": "auto", "tol": 1e-6}),
        "nuclear_svm_cvxpy": ((GS,), {"solver": "CLARABEL", "eps": 1e-8}),
        "offdiag_correlation": ((L[:, :4], L[:, 1:]), {}),
        "polar_certificate": ((GS,), {"tol": 1e-9}),
        "project_F": ((L, GS), {}),
        "regularization_path_cvxpy": ((GP, GPI, [0.1]), {"solver": "CLARABEL"}),
        "regularization_path": (
            (GP, GPI, [0.1, 0.01]),
            {"seed": 0, "d": 4, "max_iter": 200, "certify_tol": 1e-5},
        ),
        "same_support_pairs": ((GS,), {}),
        "reduce_support": ((GS,), {}),
        "same_vs_other": ((L, GS), {}),
        "solve_nuclear_svm": ((GS,), {"tol": 1e-6, "max_iter": 2000, "check_every": 10}),
        "structural_correlation": ((L, L + 1), {"C": 1e-5}),
        "subspace_collapse": ((WF, HF, np.array([[0, 1]]), 2), {}),
        "support_matrix": ((GP,), {}),
        "support_on_top": ((L, GS), {}),
        "svm_constraint_violation": ((L, GS), {}),
    },
    "att": {
        "attention_weights": ((AW, PROBLEM), {}),
        "automaton_predict": ((AUTO, [0, 1, 2]), {"tol": 1e-6}),
        "build_automaton": ((E, TOK, LAB), {"W_svm": W_SVM, "W_fin": W_FIN}),
        "cos": ((AW + 1, AW + 2), {}),
        "cyclic_samples": ((TOK, LAB, STRUCT), {}),
        "finite_component": ((E, TOK, LAB), {"method": "newton"}),
        "finite_component_cvxpy": ((E, TOK, LAB), {}),
        "graph_svm": ((E, TOK, LAB), {"method": "nnls"}),
        "graph_svm_constraints": ((E, GRAPHS), {"pairs": "edges"}),
        "graph_svm_cvxpy": ((E, TOK, LAB), {"solver": "CLARABEL"}),
        "solve_graph_svm": ((E, GRAPHS), {"method": "nnls", "pairs": "reduced"}),
        "is_acyclic": ((STRUCT,), {}),
        "local_graph_svm": ((E, TOK, ATTN), {"c_thres": 0.01, "e_thres": 0.009}),
        "local_token_priority_graphs": ((TOK, SEL, AMB, 6), {}),
        "loss_grad": ((AW, PROBLEM), {}),
        "make_problem": ((E, TOK, LAB), {"head": "identity", "loss": "log"}),
        "model_output": ((AW, E, TOK), {}),
        "project_onto_span": ((AW + 1, np.eye(64)[:3]), {}),
        "random_labels": ((rng(), TOK), {}),
        "random_sequences": ((rng(), 6, 4, 6), {}),
        "reduced_log_loss": ((AW, E, TOK, LAB), {}),
        "reduced_position_mask": ((TOK, LAB, STRUCT), {}),
        "regularization_path": ((E, TOK, LAB, [1.0, 2.0]), {"solver": "CLARABEL"}),
        "run_descent": (
            (AW[None], PROBLEM),
            {"eta": 0.1, "n_steps": 5, "record": [0, 5], "eps": 1e-12},
        ),
        "sample_dataset": (
            (rng(), 6, 4, 6, 8),
            {"graph": "cyclic", "embeddings": "gaussian", "max_draws": 1000},
        ),
        "scc_structure": ((GRAPHS[0],), {"k": 0}),
        "scc_structures": ((GRAPHS,), {}),
        "select_tokens": ((TOK, ATTN, 6), {"c_thres": 0.01, "e_thres": 0.009}),
        "smoothness_bounds": ((PROBLEM,), {}),
        "solve_max_margin": ((A_EQ, A_IN), {"method": "nnls"}),
        "subspaces": ((E, TOK, LAB), {}),
        "token_priority_graphs": ((TOK, LAB, 6), {}),
        "toy_dataset": (("cyclic",), {}),
        "total_variation": ((np.full(3, 1 / 3), np.eye(3)[0]), {}),
        "finite_report": ((E, TOK, LAB, W_FIN), {"reference": False, "h": 1e-4}),
        "graph_svm_report": ((E, TOK, LAB, W_SVM), {"reference": False}),
        "scc_report": ((GRAPHS,), {}),
        "theory_report": ((E, TOK, LAB, W_SVM, W_FIN), {"reference": False}),
        "unit_embeddings": ((rng(), 6, 8), {"kind": "gaussian"}),
    },
}
#: public functions with no argument of the kinds the table spoils (a ledger and a dict of
#: results): nothing to test here
NOTHING_TO_SPOIL: dict[str, set[str]] = {}

#: (face, function, argument) whose negative values are legitimate
NEGATIVE_OK = {
    ("att", "scc_structure", "k"),  # -1: the graph's own label
    ("lin", "toy_embeddings", "angles_deg"),
    ("lin", "make_toy", "angles_deg"),
}
#: arrays and sequences whose entries are counts, token ids, probabilities, radii or steps
NONNEGATIVE_ARRAYS = {
    "P",
    "pi",
    "S",
    "tokens",
    "labels",
    "sequence",
    "sequences",
    "pairs",
    "B_list",
    "radii",
    "lambdas",
    "record_steps",
    "record",
    "betas",
    "shape",
    "p",
    "q",
    "selected",
    "ambiguous",
}
#: arrays that take leading stack axes (a batch of problems, a trajectory, any stack of
#: matrices): no axis is one too many there
STACKS = {
    ("att", "attention_weights", "W"),  # (d, d), (B, d, d) or a trajectory (S, B, d, d)
    ("att", "cos", "A"),  # (..., a, b), broadcast
    ("att", "cos", "B"),
    ("lin", "cos", "A"),
    ("lin", "cos", "B"),
    ("att", "project_onto_span", "W"),  # (..., d, d)
}
#: a (d, d) argument that also takes the batch form (B, d, d): two axes more are too many
BATCHED = {("att", "loss_grad", "W")}
#: string arguments that are labels, not names of a choice
FREE_TEXT = {("geo", "support_matrix", "name")}


def _spoilt(face: str, fname: str, arg: str, value):
    """The bad values of the table that apply to ``value`` (the argument ``arg``)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float | np.integer | np.floating):
        out = [("nan", math.nan), ("inf", math.inf)]
        if (face, fname, arg) not in NEGATIVE_OK:
            out.append(("negative", -1 if isinstance(value, int | np.integer) else -1.0))
        return out
    if isinstance(value, str):
        return [] if (face, fname, arg) in FREE_TEXT else [("unknown name", "bogus")]
    if isinstance(value, list | tuple | np.ndarray):
        arr = np.asarray(value)
        if arr.dtype == object or not arr.size or arr.dtype.kind not in "biuf":
            return []
        out = []
        for label, bad in (("nan entry", math.nan), ("inf entry", math.inf)):
            x = arr.astype(float).copy()
            x.flat[x.size // 2] = bad
            out.append((label, x))
        if (face, fname, arg) not in STACKS:
            extra = arr[None, None] if (face, fname, arg) in BATCHED else arr[None]
            out.append(("one axis too many", extra))
        if arg in NONNEGATIVE_ARRAYS and (face, fname, arg) not in NEGATIVE_OK:
            x = arr.astype(float if arr.dtype.kind == "f" else np.int64).copy()
            x.flat[x.size // 2] = -1
            out.append(("negative entry", x))
        return out
    return []  # an object: a generator, graphs, a problem, a callable


def _cases():
    out = []
    for face, table in VALID.items():
        for fname, (args, kwargs) in table.items():
            sig = inspect.signature(getattr(FACES[face], fname))
            bound = sig.bind(*args, **kwargs)
            for arg, value in bound.arguments.items():
                for label, bad in _spoilt(face, fname, arg, value):
                    out.append(
                        pytest.param(face, fname, arg, bad, id=f"{face}.{fname}({arg}: {label})")
                    )
    return out


CASES = _cases()


def test_every_public_function_of_every_face_has_a_valid_call():
    for face, module in FACES.items():
        public = {
            n
            for n in module.__all__
            if callable(getattr(module, n)) and not isinstance(getattr(module, n), type)
        }
        covered = set(VALID[face]) | NOTHING_TO_SPOIL.get(face, set())
        assert public == covered, f"{face}: missing {public - covered}, stale {covered - public}"


@pytest.mark.parametrize(("face", "fname"), [(f, n) for f in VALID for n in VALID[f]])
def test_the_valid_calls_are_valid(face, fname):
    args, kwargs = VALID[face][fname]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(FACES[face], fname)(*args, **kwargs)


@pytest.mark.parametrize(("face", "fname", "arg", "bad"), CASES)
def test_a_bad_argument_is_refused_with_a_typed_error(face, fname, arg, bad):
    args, kwargs = VALID[face][fname]
    func = getattr(FACES[face], fname)
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.arguments[arg] = bad
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            func(*bound.args, **bound.kwargs)
    except _TooLong:
        pytest.fail(f"{face}.{fname} ran on with {arg}={bad!r} for {SECONDS} s")
    except NTPError as exc:
        if _kind(bad) == "scalar":  # a number or a name: the argument is a parameter
            assert isinstance(exc, ParameterError), f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{face}.{fname}({arg}=...) raised a bare {type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"{face}.{fname} accepted {arg}={bad!r} silently")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


#: a bad argument is refused before any computation: a call that runs this long did not
SECONDS = 20


class _TooLong(Exception):
    pass


def _too_long(signum, frame):
    raise _TooLong


def _kind(value) -> str:
    return "scalar" if isinstance(value, str | int | float) else "array"


# --------------------------------------------------------------------------- the cases
# Issue 32, items 5 and 6, as reported (each also in the table above).


REPORTED = [
    (
        "att.run_descent eta nan",
        ParameterError,
        lambda: att.run_descent(AW[None], PROBLEM, eta=math.nan, n_steps=5),
    ),
    (
        "att.run_descent eta -1",
        ParameterError,
        lambda: att.run_descent(AW[None], PROBLEM, eta=-1.0, n_steps=5),
    ),
    (
        "att.run_descent eta inf",
        ParameterError,
        lambda: att.run_descent(AW[None], PROBLEM, eta=math.inf, n_steps=5),
    ),
    (
        "att.run_descent W0 NaN",
        DataError,
        lambda: att.run_descent(np.full((1, 8, 8), np.nan), PROBLEM, eta=0.1, n_steps=5),
    ),
    ("geo.nuclear_svm tol nan", ParameterError, lambda: geo.nuclear_svm(GS, tol=math.nan)),
    ("geo.nuclear_svm tol -1", ParameterError, lambda: geo.nuclear_svm(GS, tol=-1)),
    ("lin.ntp_svm unknown solver", ParameterError, lambda: lin.ntp_svm(H, P, solver="bogus")),
    ("geo.nuclear_svm unknown solver", ParameterError, lambda: geo.nuclear_svm(GS, solver="bogus")),
    (
        "att.graph_svm unknown method",
        ParameterError,
        lambda: att.graph_svm(E, TOK, LAB, method="bogus"),
    ),
    (
        "att.regularization_path unknown solver",
        ParameterError,
        lambda: att.regularization_path(E, TOK, LAB, [1.0], solver="bogus"),
    ),
    (
        "lin.regularization_path unknown on_fail",
        ParameterError,
        lambda: lin.regularization_path(H, P, PI, [1.0], on_fail="bogus"),
    ),
    ("att.model_output letters", DataError, lambda: att.model_output(AW, E, "abc")),
    (
        "att.automaton_predict tol -1",
        ParameterError,
        lambda: att.automaton_predict(AUTO, [0, 1], tol=-1),
    ),
    (
        "att.regularization_path negative radius",
        ParameterError,
        lambda: att.regularization_path(E, TOK, LAB, [-1.0]),
    ),
    (
        "att.automaton_predict 2-D sequence",
        DataError,
        lambda: att.automaton_predict(AUTO, [[0, 1], [2, 3]]),
    ),
]


@pytest.mark.parametrize(("case", "error", "call"), REPORTED, ids=[r[0] for r in REPORTED])
def test_the_reported_bad_inputs_raise_the_typed_error_at_once(case, error, call):
    t0 = time.perf_counter()
    with pytest.raises(error):
        call()
    assert time.perf_counter() - t0 < 2.0, (
        "refused only after computing (tol=-1 ran 20,000 iterations)"
    )

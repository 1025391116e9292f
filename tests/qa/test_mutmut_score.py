"""``make mutmut``'s reading of a run: the survivors it explains (an error message reworded,
an entry of tests/mutmut/equivalent.yaml) and those it does not, and the book's table."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from ntpcore.core import paths
from tools.qa import mutmut_score as ms

# The shape of a file mutmut writes: the original function and its mutants side by side.
MUTATED = textwrap.dedent(
    """
    def x_f__mutmut_orig(x, m):
        if x < 0:
            raise ValueError("x must be non-negative")
        return np.full(m, 1.0 / m, name="w")

    def x_f__mutmut_1(x, m):
        if x < 0:
            raise ValueError("XXx must be non-negative XX")
        return np.full(m, 1.0 / m, name="w")

    def x_f__mutmut_2(x, m):
        if x < 0:
            raise ValueError("X MUST BE NON-NEGATIVE")
        return np.full(m, 1.0 / m, name="w")

    def x_f__mutmut_3(x, m):
        if x < 0:
            raise ValueError("x must be non-negative")
        return np.full(m, 1.0 / m, name="XXwXX")

    def x_f__mutmut_4(x, m):
        if x <= 0:
            raise ValueError("x must be non-negative")
        return np.full(m, 1.0 / m, name="w")

    def x_f__mutmut_5(x, m):
        if x < 0:
            raise ValueError("x must be non-negative")
        return np.full(m, 2.0 / m, name="w")

    def x_f__mutmut_6(x, m):
        if x < 0:
            raise ValueError(None)
        return np.full(m, 1.0 / m, name="w")

    def x_g__mutmut_orig(x):
        raise ValueError(
            "x is "
            f"{x}, wanted "
            "more"
        )

    def x_g__mutmut_1(x):
        raise ValueError(
            "XXx is XX"
            f"{x}, wanted "
            "more"
        )
    """
)


def test_survivors_are_explained_only_by_a_reworded_message_or_a_listed_equivalent(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(MUTATED)
    codes = {f"pkg.mod.x_f__mutmut_{k}": code for k, code in enumerate([1, 0, 0, 0, 0, 0, 0])}
    del codes["pkg.mod.x_f__mutmut_0"]
    codes["pkg.mod.x_f__mutmut_1"] = 0
    codes["pkg.mod.x_f__mutmut_5"] = 1  # killed: not a survivor
    codes["pkg.mod.x_g__mutmut_1"] = 0
    equivalent = {("pkg/mod.py", "f", "if x < 0:", "if x <= 0:"): "a tie that cannot occur"}
    counts, survivors = ms.classify("pkg/mod.py", path, codes, equivalent)
    assert counts == {"survived": 6, "killed": 1}
    by = {s.name: s for s in survivors}
    # "XXx must be non-negative XX" is not the original wrapped in XX: not a rewording
    assert by["x_f__mutmut_1"].kind is None
    assert by["x_f__mutmut_2"].kind == "message wording"
    # the same typography outside a raise is no message: unexplained
    assert by["x_f__mutmut_3"].kind is None
    assert by["x_f__mutmut_3"].before == 'return np.full(m, 1.0 / m, name="w")'
    assert by["x_f__mutmut_3"].after == 'return np.full(m, 1.0 / m, name="XXwXX")'
    assert by["x_f__mutmut_4"].kind == "equivalent"
    assert by["x_f__mutmut_4"].explained == "a tie that cannot occur"
    assert by["x_f__mutmut_6"].kind is None  # the reason dropped: never explained
    assert by["x_f__mutmut_6"].function == "f"
    # a stretch of an implicitly concatenated message wrapped in XX
    assert by["x_g__mutmut_1"].kind == "message wording"


def test_the_equivalents_file_parses_and_names_the_modules_run():
    eq = ms.load_equivalent()
    assert eq, "tests/mutmut/equivalent.yaml lists no mutant"
    files = {f for f, *_ in eq}
    assert files <= {src for src, _ in ms.MODULES.values()}
    assert all(why and before != after for (_, _, before, after), why in eq.items())


def test_every_module_has_its_own_existing_tests():
    for source, tests in ms.MODULES.values():
        assert (paths.ROOT / source).is_file()
        assert tests and all((paths.ROOT / t).exists() for t in tests)


def test_display_names_of_functions_and_methods():
    assert ms._display_name("check_tokens") == "check_tokens"
    assert ms._display_name("ǁSCCStructureǁhigher") == "SCCStructure.higher"


@pytest.fixture
def ntpclaims():
    spec = importlib.util.spec_from_file_location(
        "ntpclaims", paths.BOOK_DIR / "_ext" / "ntpclaims.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_book_table_reads_the_report(ntpclaims):
    data = {
        "when": "2026-11-25T17:00:00+00:00",
        "commit": "0123456789abcdef",
        "dirty": False,
        "tool": "mutmut 3.8.1",
        "killed": 9,
        "total": 12,
        "modules": [
            {
                "file": "ntpcore/core/logits.py",
                "tests": ["tests/core"],
                "mutants": 12,
                "detected": 9,
                "survivors": [
                    {"kind": "equivalent", "explained": "keepdims"},
                    {"kind": "message wording", "explained": "reworded"},
                    {"kind": None, "explained": None},
                ],
            }
        ],
    }
    text = ntpclaims.mutmut_text(data)
    assert "**Code-level mutation score: 9/12 mutants killed**" in text
    assert "mutmut 3.8.1, run on 2026-11-25 at commit `0123456789`" in text
    assert "9/12 (75%)" in text
    assert "2 (1 equivalent, 1 reword an error message) / 1" in text


def test_functions_mutmut_left_alone_are_named(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import functools\n\n"
        "def f(x):\n    return x\n\n"
        "@functools.lru_cache\ndef g(x):\n    return x\n\n"
        "class C:\n    def h(self):\n        return 1\n\n"
        "    @property\n    def p(self):\n        return 2\n"
    )
    assert ms.not_mutated(src, ["x_f", "xǁCǁh"]) == ["g", "C.p"]

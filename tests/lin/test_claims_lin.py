"""The claims ledger of the linear paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales W* by 1.05 inside
``ntpcore.lin.finite_component`` (the function the ``lin-toy-solutions`` notebook computes
W* with): eq. (4) no longer holds, and the quick run of the figure must fail, naming the
claim ``wstar-log-odds`` [lin, Def. 1, eq. (4)], and publish nothing.
"""

from __future__ import annotations

import json

from ntpcore.pipeline import runner

SABOTAGE = """\
import ntpcore.lin as _lin

_original = _lin.finite_component


def _scaled(H, P):
    return 1.05 * _original(H, P)


_lin.finite_component = _scaled
"""


def test_a_wrong_finite_component_fails_the_toy_solutions_figure(tmp_path, monkeypatch, capsys):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SABOTAGE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"), prepend=":")
    for var, sub in (
        ("NTP_CACHE_DIR", "cache"),
        ("NTP_FIGURE_DIR", "figures"),
        ("NTP_EXECUTED_DIR", "executed"),
    ):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setattr(runner, "FAILED_DIR", tmp_path / "failed")

    rc = runner.main(["--only", "lin-toy-solutions", "--profile", "quick"])

    printed = capsys.readouterr()
    assert rc != 0
    assert "lin-toy-solutions:wstar-log-odds" in printed.out + printed.err
    assert not (tmp_path / "figures" / "lin-toy-solutions.png").exists()
    sidecar = tmp_path / "failed" / "lin-toy-solutions" / "lin-toy-solutions.json"
    status = {c["id"]: c["status"] for c in json.loads(sidecar.read_text())["claims"]}
    assert status["lin-toy-solutions:wstar-log-odds"] == "fail"
    # the claims that do not involve eq. (4) still hold: the sabotage is what failed
    assert status["lin-toy-solutions:wmm-w1-equals-w5"] == "pass"

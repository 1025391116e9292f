"""The runner on a dask cluster (``--scheduler``): the same sidecars and claims as a run on
this machine, the runner's order, an interruption or a lost worker that leaves nothing
behind, and a clear line for an address, a scheduler or workers it cannot use."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from nbutil import write_notebook

from ntpcore.core import paths
from ntpcore.runner import cluster as clustermod
from ntpcore.runner import planning, registry, staging
from ntpcore.runner import runner as reproduce

distributed = pytest.importorskip("distributed")

BUILD = paths.ROOT / "_build"
#: Wall and compute times differ from run to run; everything else in a sidecar must not.
TIMES = {"compute_wall_time_s", "notebook_wall_time_s"}

PARAMS = 'fig_id = "lin-x"  # key\nprofile = "paper"  # [paper|quick] profile\n'
BODY = """\
import time
time.sleep(SLEEP)
from matplotlib import pyplot as plt
from ntpcore.figure import claims, provenance
ledger = claims.Ledger(fig_id, profile)
ledger.check("x", "x", 0.0, claims.at_most(1.0), source="[lin, eq. (4)]")
provenance.savefig(plt.figure(), fig_id, {}, profile=profile, claims=ledger)
"""


def _entry(tmp_path, fig_id, body=None, reuses=()):
    body = BODY.replace("SLEEP", "0") if body is None else body
    nb = write_notebook(tmp_path / f"{fig_id}.ipynb", PARAMS.replace("lin-x", fig_id), body)
    return registry.FigureEntry(fig_id, "lin", "-", "t", str(nb), (), reuses=reuses)


def _staging(fig_id):
    return list(BUILD.glob(f"ntp-*-{fig_id}-*"))


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("NTP_EXECUTED_DIR", str(tmp_path / "executed"))
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(staging, "FAILED_DIR", tmp_path / "failed")
    return tmp_path


@pytest.fixture(scope="module")
def one_worker():
    """A LocalCluster of one worker with one thread, whose scheduler gives up on a task at
    the first worker that dies with it (``allowed-failures`` 0: no retry elsewhere)."""
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as local,
    ):
        yield local.scheduler_address


@pytest.mark.parametrize(
    "address",
    [
        "localhost:8786",
        "tcp://host",
        "tcp://host:0",
        "tcp://host:99999",
        "http://host:8786",
        "tcp://host:8786/x",
        "tcp://-host:8786",
        "",
    ],
)
def test_a_scheduler_address_is_checked_before_connecting(monkeypatch, capsys, address):
    called = []
    monkeypatch.setattr(clustermod, "connect", lambda *a, **k: called.append(a))
    assert reproduce.main(["--only", "lin-toy-solutions", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --scheduler expects the address of a dask scheduler")
    assert called == []


@pytest.mark.parametrize(
    "address", ["tcp://10.0.0.5:8786", "tls://sched.example.org:8786", "tcp://[::1]:8786"]
)
def test_scheduler_addresses_as_dask_prints_them_are_accepted(address):
    assert clustermod.check_address(address) == address


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "2"], "--jobs does not apply with --scheduler"),
        (["--jobs", "1"], "--jobs does not apply with --scheduler"),
        (["--list"], "--list takes no other option"),
    ],
)
def test_jobs_and_list_do_not_go_with_a_scheduler(monkeypatch, capsys, argv, message):
    called = []
    monkeypatch.setattr(clustermod, "connect", lambda *a, **k: called.append(a))
    assert reproduce.main([*argv, "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    assert message in capsys.readouterr().err
    assert called == []


def test_a_scheduler_that_does_not_answer_is_one_error_line(monkeypatch, capsys):
    with socket.socket() as s:  # a port no one listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(clustermod, "CONNECT_TIMEOUT", 1.0)
    argv = ["--only", "lin-toy-solutions", "--scheduler", f"tcp://127.0.0.1:{port}"]
    assert reproduce.main(argv) == 2
    printed = capsys.readouterr()
    assert printed.err.strip().splitlines() == [
        f"error: no dask scheduler answered at tcp://127.0.0.1:{port} within 1 s (is "
        "'dask scheduler' running there, and the port open to this machine?)"
    ]
    assert "Reproducing" not in printed.out


class _Client:
    """What check_workers asks a client: run a function on every worker, the workers."""

    def __init__(self, states=None, error=None):
        self.states, self.error = states, error
        self.scheduler = type("S", (), {"address": "tcp://s:1"})()

    def run(self, func, *args):
        if self.error:
            raise self.error
        return self.states

    def nthreads(self):
        return {w: 2 for w in self.states}


def test_workers_on_another_commit_or_cache_or_without_a_checkout_are_refused(tmp_path):
    mine = clustermod.git_state()["commit"]
    ok = {"root": "/w", "checkout": True, "commit": mine, "dirty": False, "sees_cache": True}
    assert clustermod.check_workers(_Client({"tcp://w:1": ok}), tmp_path) == {
        "address": "tcp://s:1",
        "workers": 1,
        "threads": 2,
    }
    assert not list(tmp_path.glob(".shared-*")), "the marker file is left in the cache"
    other = {**ok, "commit": "0123456789abcdef"}
    with pytest.raises(clustermod.ClusterError, match="commit 0123456789 .* same commit"):
        clustermod.check_workers(_Client({"tcp://w:1": ok, "tcp://w:2": other}), tmp_path)
    apart = {**ok, "sees_cache": False}
    with pytest.raises(clustermod.ClusterError, match="does not share the computation cache"):
        clustermod.check_workers(_Client({"tcp://w:1": apart}), tmp_path)
    wheel = {**ok, "checkout": False, "commit": None}
    with pytest.raises(clustermod.ClusterError, match="installed without a checkout"):
        clustermod.check_workers(_Client({"tcp://w:1": wheel}), tmp_path)
    missing = _Client(error=ModuleNotFoundError("No module named 'ntpcore'"))
    with pytest.raises(clustermod.ClusterError, match="cannot run ntpcore"):
        clustermod.check_workers(missing, tmp_path)


def test_the_workers_see_the_cache_this_runner_shares(cluster, tmp_path):
    with distributed.Client(cluster, set_as_default=False) as client:
        info = clustermod.check_workers(client, tmp_path / "shared")
    assert info == {"address": cluster, "workers": 2, "threads": 2}


#: Fast quick-profile figures of the three papers.
FIGURES = ["lin-toy-solutions", "att-conceptual", "geo-datasets"]


def _sidecars(folder):
    out = {}
    for fig_id in FIGURES:
        sidecar = json.loads((folder / f"{fig_id}.json").read_text())
        out[fig_id] = {k: v for k, v in sidecar.items() if k not in TIMES}
        out[fig_id]["data"] = json.loads((folder / f"{fig_id}.data.json").read_text())
    return out


@pytest.mark.long
def test_the_cluster_reproduces_the_local_runs_sidecars_and_claims(
    cluster, tmp_path, monkeypatch, capsys
):
    """Three quick figures (one per paper), each run from its own empty cache: on this
    machine, then on the two workers of the ``cluster`` fixture."""
    runs = {}
    for name, extra in (("here", []), ("dask", ["--scheduler", cluster])):
        for var in ("FIGURE", "EXECUTED", "CACHE"):
            monkeypatch.setenv(f"NTP_{var}_DIR", str(tmp_path / name / var.lower()))
        assert reproduce.main(["--only", *FIGURES, "--profile", "quick", *extra]) == 0, (
            capsys.readouterr().err
        )
        runs[name] = tmp_path / name
    out = capsys.readouterr().out
    assert f"on the dask cluster at {cluster} (2 worker(s), 2 thread(s))" in out
    local, remote = (_sidecars(runs[n] / "figure") for n in ("here", "dask"))
    for fig_id in FIGURES:
        assert local[fig_id]["claims"], f"{fig_id}: no claims to compare"
        assert all(c["status"] != "fail" for c in remote[fig_id]["claims"])
        assert remote[fig_id] == local[fig_id], fig_id
        assert (runs["dask"] / "executed" / f"{fig_id}.ipynb").exists()
    # the cluster's workers computed into the caller's cache, not the fixture's own
    assert list((runs["dask"] / "cache").glob("*/*.json"))
    assert not (tmp_path / "cluster").exists()
    records = {
        n: json.loads(next((runs[n] / "figure" / "runs").glob("*.json")).read_text()) for n in runs
    }
    assert records["here"]["scheduler"] is None
    assert records["dask"]["scheduler"] == {"address": cluster, "workers": 2, "threads": 2}
    assert records["dask"]["n_ok"] == len(FIGURES) and records["dask"]["jobs"] == 2
    assert not any(_staging(f) for f in FIGURES)


@pytest.mark.long
def test_figures_start_in_the_runners_order_on_the_cluster(one_worker, dirs, monkeypatch):
    """One worker thread runs the figures one at a time: the figure another reuses first, its
    reader last (``--order reuse``), whatever the order of ``--only``."""
    reg = {
        "lin-c": _entry(dirs, "lin-c", reuses=("lin-b",)),
        "lin-a": _entry(dirs, "lin-a"),
        "lin-b": _entry(dirs, "lin-b"),
    }
    monkeypatch.setattr(reproduce, "load_registry", lambda: reg)
    jobs = planning.order_jobs(planning.plan(list(reg), "quick", {}, reg))
    assert [j.entry.fig_id for j in jobs] == ["lin-b", "lin-a", "lin-c"]
    argv = ["--only", *reg, "--profile", "quick", "--scheduler", one_worker]
    assert reproduce.main(argv) == 0
    (record,) = (dirs / "figures" / "runs").glob("*.json")
    finished = list(json.loads(record.read_text())["figures"])  # in the order they came back
    assert finished == ["lin-b", "lin-a", "lin-c"]
    for fig_id in reg:
        assert (dirs / "figures" / f"{fig_id}.png").exists()


def test_a_claim_that_fails_on_a_worker_is_kept_here_for_reading(
    one_worker, dirs, monkeypatch, capsys
):
    """The caller, not the worker, keeps a failed figure: under its ``_build/failed/``, with
    the sidecar and every claim, and publishes nothing."""
    body = BODY.replace("SLEEP", "0").replace("claims.at_most(1.0)", "claims.at_most(-1.0)")
    entry = _entry(dirs, "lin-fails", body=body)
    monkeypatch.setattr(reproduce, "load_registry", lambda: {"lin-fails": entry})
    argv = ["--only", "lin-fails", "--profile", "quick", "--scheduler", one_worker]
    assert reproduce.main(argv) == 1
    err = capsys.readouterr().err
    assert "lin-fails: 1 claim(s) do not hold" in err and "kept for reading" in err
    kept = json.loads((dirs / "failed" / "lin-fails" / "lin-fails.json").read_text())
    assert [c["status"] for c in kept["claims"]] == ["fail"]
    assert (dirs / "failed" / "lin-fails.ipynb").exists()
    assert not (dirs / "figures" / "lin-fails.png").exists()
    assert not _staging("lin-fails")


DIES = """\
import os, signal, time
import psutil
os.kill(psutil.Process(os.getppid()).ppid(), signal.SIGKILL)  # the kernel's worker
time.sleep(60)
"""


def test_a_worker_that_dies_is_reported_like_a_failed_figure(one_worker, dirs, monkeypatch, capsys):
    entry = _entry(dirs, "lin-dies", body=DIES)
    monkeypatch.setattr(reproduce, "load_registry", lambda: {"lin-dies": entry})
    argv = ["--only", "lin-dies", "--profile", "quick", "--scheduler", one_worker]
    assert reproduce.main(argv) == 1
    printed = capsys.readouterr()
    assert "FAIL lin-dies" in printed.out and "0 ok, 1 failed" in printed.out
    errors = [ln for ln in printed.err.splitlines() if ln.startswith("error")]
    assert len(errors) == 1 and "the dask worker running it died" in errors[0], printed.err
    assert not (dirs / "figures" / "lin-dies.png").exists()
    # the notebook's process outlives its worker only until it notices, then cleans up
    deadline = time.time() + 30
    while _staging("lin-dies") and time.time() < deadline:
        time.sleep(0.5)
    assert not _staging("lin-dies"), "a staging folder was left behind"


SCRIPT = textwrap.dedent(
    """
    import sys
    from ntpcore.runner import registry, runner
    entry = registry.FigureEntry("lin-stop", "lin", "-", "t", sys.argv[1], ())
    runner.load_registry = lambda: {"lin-stop": entry}
    sys.exit(runner.main(["--only", "lin-stop", "--profile", "quick", "--scheduler", sys.argv[2]]))
    """
)


@pytest.mark.long
def test_sigterm_stops_the_notebooks_on_the_workers_and_leaves_no_staging_folder(cluster, dirs):
    entry = _entry(dirs, "lin-stop", body=BODY.replace("SLEEP", "60"))
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, entry.notebook, cluster],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not _staging("lin-stop"):
        time.sleep(0.2)
    assert _staging("lin-stop"), "the figure never started on a worker"
    time.sleep(5)  # the kernel is sleeping in its cell
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted: 0 of 1 figure(s) finished")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert time.time() - t0 < 45, "the runner waited for the notebook instead of stopping it"
    assert not _staging("lin-stop"), "a staging folder was left behind"
    assert not (dirs / "figures").exists()

"""Shared pytest set-up: a non-interactive matplotlib backend for the test process only, the
harness of the sabotage tests (one per paper) of the claims ledger, and the dask cluster the
sweep tests compare the serial runs with."""

import os

# The tests' process computes on one thread, as `make` (OMP_NUM_THREADS=1), the runner's
# kernels and the dask workers do: a multithreaded BLAS rounds some reductions differently,
# and the tests compare serial runs with the workers' to the last bit.  Set before numpy is
# imported (OpenBLAS reads it once, when it loads).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import json  # noqa: E402

import matplotlib  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")


@pytest.fixture(autouse=True, scope="session")
def _tests_cache(tmp_path_factory):
    """The tests' computation cache: a folder of this test session, shared by its xdist
    workers, never the checkout's ``results/cache/`` (which ``make test``'s quick run then
    starts empty, as its run record says) -- unless ``NTP_CACHE_DIR`` names one already."""
    if "NTP_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["NTP_CACHE_DIR"] = str(tmp_path_factory.getbasetemp().parent / "ntp-cache")
    try:
        yield
    finally:
        os.environ.pop("NTP_CACHE_DIR", None)


@pytest.fixture
def sabotaged_run(tmp_path, monkeypatch, capsys):
    """Run one figure through the runner (quick profile) with ``sitecustomize`` code that
    breaks a package function inside the kernel (kernels inherit the runner's environment),
    with fresh cache, figure and executed folders.  Returns ``(rc, printed, statuses)``:
    the runner's exit code, its output, and claim id -> status from the failed sidecar."""
    from ntpcore.runner import runner, staging

    def run(fig_id: str, sabotage: str):
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "sitecustomize.py").write_text(sabotage)
        monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"), prepend=":")
        for var, sub in (
            ("NTP_CACHE_DIR", "cache"),
            ("NTP_FIGURE_DIR", "figures"),
            ("NTP_EXECUTED_DIR", "executed"),
        ):
            monkeypatch.setenv(var, str(tmp_path / sub))
        monkeypatch.setattr(staging, "FAILED_DIR", tmp_path / "failed")
        rc = runner.main(["--only", fig_id, "--profile", "quick"])
        printed = capsys.readouterr()
        assert not (tmp_path / "figures" / f"{fig_id}.png").exists(), "published anyway"
        sidecar = tmp_path / "failed" / fig_id / f"{fig_id}.json"
        claims = json.loads(sidecar.read_text())["claims"] if sidecar.exists() else []
        return rc, printed.out + printed.err, {c["id"]: c["status"] for c in claims}

    return run


@pytest.fixture
def cluster(tmp_path):
    """The scheduler address of a two-process ``dask.distributed`` LocalCluster whose workers
    cache under ``tmp_path / "cluster"``: never the serial run's cache (so a sweep on the
    cluster recomputes instead of reading the serial results) nor the repository's.  The
    workers' environment is fixed when they start, hence set here and not by the test."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # any free port: None means 8787, and a busy 8787 warns
        env={"NTP_CACHE_DIR": str(tmp_path / "cluster")},
    ) as local:
        yield local.scheduler_address


def pytest_collection_modifyitems(config, items):
    """The tests marked ``long`` first, the others after them, each group in its collected
    order.  ``make test`` hands them out with pytest-xdist's ``worksteal``: a worker that runs
    out takes half of the other's remaining queue, so the run ends with short tests on both
    workers, not with one core idle beside a long test that started late (the dask cluster
    comparison, about 35 s, used to; 193 s before, 181 s after on this 2-core machine)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)

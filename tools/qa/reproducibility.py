r"""How far the book's numbers reproduce: the quick profile under several floating-point paths.

numpy and OpenBLAS choose their kernels by CPU, and torch (the geometry paper's trainers) by
its own CPU capability; a last-bit difference between two kernels can grow through thousands
of optimiser steps.  One machine can run several of these paths by switching kernels off:

==========================  ===============================================================
configuration               environment
==========================  ===============================================================
``native``                  what this CPU selects
``numpy-avx2``              numpy's SIMD dispatch capped at AVX2 (``NPY_DISABLE_CPU_FEATURES``)
``numpy-baseline``          numpy at its baseline (no dispatched SIMD beyond the build's)
``openblas-<core>``         OpenBLAS kernels of another core (``OPENBLAS_CORETYPE``): Nehalem,
                            Sandybridge, Haswell, SkylakeX
``threads-2``               OpenBLAS on two threads (the runner keeps torch on one); idle
                            threads sleep at once (``OPENBLAS_THREAD_TIMEOUT``)
``torch-avx2``              torch's kernels, MKL and oneDNN at AVX2 (``ATEN_CPU_CAPABILITY``,
                            ``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``)
``torch-default``           torch's scalar kernels (``ATEN_CPU_CAPABILITY=default``): no
                            vectorised exp, softmax or reductions
``mkl-compatible``          every product by MKL, on its vendor-neutral code path
                            (``MKL_CBWR=COMPATIBLE``), the transformer's and the LSTM's
                            too (``NTP_ONEDNN=0``: torch's ``linear``, not oneDNN's).
                            MKL picks its kernels by CPU, vendor included, so two CPUs
                            with the same AVX-512 can differ; capping the instructions
                            does not show it, this path does
``sandybridge-baseline``    OpenBLAS Sandybridge and numpy at baseline together
``numpy-kernels``           the compiled extensions off (``NTP_COMPILED=0``): the attention
                            descents on numpy, the UFM's AdamW by torch, the transformer's
                            trie attention, RMSNorm and SwiGLU in torch's operations (what a
                            machine without a C compiler at install runs)
``haswell-threads-2``       ``openblas-haswell`` and ``threads-2`` together: a machine of
                            another core type whose BLAS runs two threads
``no-compiled-mkl``         ``numpy-kernels`` and ``mkl-compatible`` together: a machine
                            without a C compiler whose MKL takes the vendor-neutral path
==========================  ===============================================================

The last two are CI's (``.ci/run``): each joins switches that move different figures (on
an AMD EPYC with AVX-512: ``numpy-kernels`` moved 8 attention figures and no other,
``mkl-compatible`` 14 geometry and linear figures and no attention one; ``threads-2`` moved
6 figures, each moved by ``openblas-haswell`` too), so two runs exercise what four did;
``make reproducibility`` runs the single switches too, to tell which one moves a number.

``python -m tools.qa.reproducibility`` (``make reproducibility``) runs the quick
profile once per configuration, each from its own empty cache (a cached training would hide
the configuration), records what each configuration really selected (numpy's dispatched
features, OpenBLAS's core, torch's capability and products: :mod:`tools.qa.probe`), and
writes ``results/reproducibility/report.json``:

* ``printed``: every number the tagged cells print (:mod:`tools.qa.golden`), its value
  in each configuration, its spread (max - min) and its golden tolerance; numbers whose
  spread exceeds their tolerance are listed as suggestions (``golden_update tolerances`` applies
  them, for review);
* ``claims``: every claim's measured value at full precision, its relative spread and the
  number of decimal digits that agree across the configurations;
* ``images``: the RMS pixel difference of each figure from the first configuration's and from
  its baseline image (:mod:`tools.qa.images`);
* ``checks``: each configuration's run compared with the golden outputs and baseline images;
  the command exits non-zero when one of them fails.

The book's *Reproducibility across machines* page is rendered from that report.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.figure import provenance
from tools.qa import golden, golden_update, images, printed
from tools.qa.adopt import AdoptError, adoptable, copy_run
from tools.qa.probe import probe

__all__ = ["CONFIGS", "Config", "REPORT", "RUNS", "collect", "main", "probe", "run_config"]

RUNS = paths.ROOT / "_build" / "repro"
REPORT = paths.RESULTS_DIR / "reproducibility" / "report.json"

_NPY_AVX2 = "X86_V4 AVX512_ICL AVX512_SPR"
_NPY_BASE = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
#: OpenBLAS core types a run can force, with the CPU flags their kernels need
_OPENBLAS_CORES = {
    "Nehalem": ("sse4_2",),
    "Sandybridge": ("avx",),
    "Haswell": ("avx2", "fma"),
    "SkylakeX": ("avx512f",),
}


@dataclass(frozen=True)
class Config:
    """A floating-point configuration: environment variables the kernels read."""

    name: str
    env: dict[str, str]
    label: str
    #: CPU flags (``/proc/cpuinfo``) the forced kernels need: forcing OpenBLAS's SkylakeX
    #: kernels on a CPU without AVX-512 would stop on an illegal instruction.
    requires: tuple[str, ...] = ()

    def available(self) -> str | None:
        """``None`` if this machine can run it, else why not."""
        if not self.requires:
            return None
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return f"needs an x86-64 CPU (this is {platform.machine()})"
        missing = [f for f in self.requires if f not in _cpu_flags()]
        return f"this CPU lacks {', '.join(missing)}" if missing else None


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in [
        Config("native", {}, "native kernels"),
        Config("numpy-avx2", {"NPY_DISABLE_CPU_FEATURES": _NPY_AVX2}, "numpy at AVX2", ("avx2",)),
        Config(
            "numpy-baseline",
            {"NPY_DISABLE_CPU_FEATURES": _NPY_BASE},
            "numpy at baseline",
            ("sse4_2",),
        ),
        *(
            Config(
                f"openblas-{core.lower()}", {"OPENBLAS_CORETYPE": core}, f"OpenBLAS {core}", needs
            )
            for core, needs in _OPENBLAS_CORES.items()
        ),
        # OPENBLAS_THREAD_TIMEOUT=4: an idle OpenBLAS thread sleeps after 2^4 cycles instead of
        # spinning for 2^28; with two kernels of two threads each on two cores the spinning
        # took 144 s for three figures that take 33 s (the results are the same: it changes
        # when an idle thread sleeps, not how work is split)
        Config(
            "threads-2",
            {"OPENBLAS_NUM_THREADS": "2", "OPENBLAS_THREAD_TIMEOUT": "4"},
            "OpenBLAS on 2 threads",
        ),
        Config(
            "torch-avx2",
            {
                "ATEN_CPU_CAPABILITY": "avx2",
                "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                "ONEDNN_MAX_CPU_ISA": "AVX2",
            },
            "torch, MKL and oneDNN at AVX2",
            ("avx2", "fma"),
        ),
        Config("torch-default", {"ATEN_CPU_CAPABILITY": "default"}, "torch's scalar kernels"),
        Config(
            "mkl-compatible",
            {"MKL_CBWR": "COMPATIBLE", "NTP_ONEDNN": "0"},
            "every product by MKL's vendor-neutral path",
        ),
        Config("numpy-kernels", {"NTP_COMPILED": "0"}, "compiled extensions off"),
    ]
}


def _joined(name: str, label: str, *parts: str) -> Config:
    """A configuration that sets the environments of ``parts`` together (one machine that
    differs from this one in several ways); it needs what each part needs."""
    configs = [CONFIGS[p] for p in parts]
    env: dict[str, str] = {}
    for c in configs:
        for k, v in c.env.items():
            if env.setdefault(k, v) != v:  # e.g. two OpenBLAS core types: not one machine
                raise ValueError(f"{name}: {' and '.join(parts)} set {k} differently")
    requires = tuple(dict.fromkeys(f for c in configs for f in c.requires))
    return Config(name, env, label, requires)


for _c in (
    _joined(
        "sandybridge-baseline",
        "OpenBLAS Sandybridge + numpy at baseline",
        "openblas-sandybridge",
        "numpy-baseline",
    ),
    _joined("haswell-threads-2", "OpenBLAS Haswell on 2 threads", "openblas-haswell", "threads-2"),
    _joined(
        "no-compiled-mkl",
        "compiled extensions off + MKL's vendor-neutral path",
        "numpy-kernels",
        "mkl-compatible",
    ),
):
    CONFIGS[_c.name] = _c


def run_dir(name: str) -> Path:
    return RUNS / name


def run_config(cfg: Config, *, jobs: int, only: list[str] | None = None) -> Path:
    """Run the quick profile under ``cfg`` from an empty cache into ``_build/repro/<name>``."""
    d = run_dir(cfg.name)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    env = {
        **os.environ,
        **cfg.env,
        "NTP_CACHE_DIR": str(d / "cache"),
        "NTP_FIGURE_DIR": str(d / "figures"),
        "NTP_EXECUTED_DIR": str(d / "executed"),
    }
    cmd = [sys.executable, "-m", "ntpcore.reproduce", "--profile", "quick", "--jobs", str(jobs)]
    if only:
        cmd += ["--only", *only]
    meta = {"config": cfg.name, "env": cfg.env, "probe": probe(cfg.env), "command": cmd[1:]}
    with open(d / "run.log", "w") as log:
        rc = subprocess.run(
            cmd, env=env, cwd=paths.ROOT, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    meta["returncode"] = rc
    write_text_atomic(d / "config.json", json.dumps(meta, indent=2))
    shutil.rmtree(d / "cache", ignore_errors=True)  # results are read from figures/ and executed/
    return d


def adopt_run(cfg: Config, run: Path) -> Path:
    """Take ``cfg``'s run from the finished run ``run`` (:mod:`tools.qa.adopt`: every figure,
    the quick profile, this commit, an empty cache at the start) instead of running it again."""
    rec = adoptable(run, profile="quick", cold=True)
    d = run_dir(cfg.name)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    copy_run(run, d / "executed", d / "figures")
    meta = {
        "config": cfg.name,
        "env": cfg.env,
        "probe": probe(cfg.env),
        "command": f"adopted: the run of {run} (record {rec['started']})",
        "returncode": 0,
    }
    write_text_atomic(d / "config.json", json.dumps(meta, indent=2))
    return d


# ------------------------------------------------------------------------- collecting
def _printed(executed: Path) -> dict[str, tuple[str, printed.Number, str]]:
    """Every printed number of the tagged cells: key -> (words of its line, number, where)."""
    out = {}
    for nb_path in sorted(executed.glob("*.ipynb")):
        fig = nb_path.stem
        for k, text in enumerate(golden.extract(nbformat.read(nb_path, as_version=4)), 1):
            for j, line in enumerate(text.splitlines(), 1):
                tok = printed.tokenize(line)
                where = f"cell {k}, line {j}" + (f" ({tok.claim})" if tok.claim else "")
                for i, num in enumerate(tok.numbers):
                    out[golden_update.number_key(fig, k, j, i)] = (tok.words, num, where)
    return out


def _claims(figures: Path) -> dict[str, float]:
    """Every numeric claim's measured value (full precision) from the sidecars."""
    out = {}
    for side in sorted(p for p in figures.glob("*.json") if not p.name.endswith(".data.json")):
        try:
            data = json.loads(side.read_text())
        except (OSError, ValueError):
            continue
        for c in data.get("claims", []) if isinstance(data, dict) else []:
            v = c.get("measured")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                if c.get("status") != "not-evaluated":
                    out[c["id"]] = float(v)
    return out


def _digits(values: list[float]) -> float | None:
    """Decimal digits that agree: -log10 of the relative spread (None: bitwise equal)."""
    lo, hi = min(values), max(values)
    if lo == hi:
        return None
    scale = max(abs(lo), abs(hi))
    return max(0.0, -math.log10((hi - lo) / scale))


@dataclass
class Collected:
    configs: list[dict] = field(default_factory=list)
    printed: dict[str, dict] = field(default_factory=dict)
    claims: dict[str, dict] = field(default_factory=dict)
    images: dict[str, dict] = field(default_factory=dict)
    checks: dict[str, dict] = field(default_factory=dict)


def _golden_tols(golden_dir: Path) -> dict[str, float | None]:
    tols: dict[str, float | None] = {}
    for path in golden_dir.glob("*.txt"):
        for k, text in enumerate(golden.parse(path.read_text(encoding="utf-8")), 1):
            for j, line in enumerate(text.splitlines(), 1):
                for i, num in enumerate(printed.parse_golden_line(line).numbers):
                    tols[golden_update.number_key(path.stem, k, j, i)] = num.tol
    return tols


def collect(
    names: list[str], golden_dir: Path = golden.GOLDEN_DIR, *, only: list[str] | None = None
) -> Collected:
    """Read the runs of ``names`` (the first is the reference) and compare them (with
    ``only``, runs of those figures alone: the other baseline images are not missing)."""
    out = Collected()
    runs = []
    for name in names:
        d = run_dir(name)
        meta = json.loads((d / "config.json").read_text())
        meta["label"] = CONFIGS[name].label if name in CONFIGS else name
        out.configs.append(meta)
        runs.append((name, d))
    tols = _golden_tols(golden_dir)
    printed = {name: _printed(d / "executed") for name, d in runs}
    for key in sorted(set().union(*printed.values())):
        rows = {n: p[key] for n, p in printed.items() if key in p}
        words = {w for w, _, _ in rows.values()}
        values = {n: num.value for n, (_, num, _) in rows.items()}
        ref = next(iter(rows.values()))
        spread = max(values.values()) - min(values.values())
        out.printed[key] = {
            "where": ref[2],
            "words": ref[0],  # the line with its numbers as '#': a key is a position
            "measured": ref[1].measured,
            "values": {n: num.text for n, (_, num, _) in rows.items()},
            "spread": spread if len(words) == 1 else None,
            "floor": ref[1].floor,
            "tol": tols.get(key),
            "missing": [n for n in printed if n not in rows],
        }
    claims = {name: _claims(d / "figures") for name, d in runs}
    for cid in sorted(set().union(*claims.values())):
        vals = {n: c[cid] for n, c in claims.items() if cid in c}
        v = list(vals.values())
        lo, hi = min(v), max(v)
        out.claims[cid] = {
            "values": vals,
            "spread": hi - lo,
            "rel_spread": (hi - lo) / max(abs(lo), abs(hi)) if hi != lo else 0.0,
            "digits": _digits(v),
            "configs": len(v),
        }
    ref_name, ref_dir = runs[0]
    for png in sorted((ref_dir / "figures").glob("*.png")):
        fig = png.stem
        row: dict = {"rms": {}, "baseline_rms": {}, "tol": images.tolerance(fig)}
        for name, d in runs:
            other = d / "figures" / png.name
            row["rms"][name] = images.rms(png, other) if other.exists() else None
            base = images.baseline(fig)
            row["baseline_rms"][name] = (
                images.rms(base, other) if base.exists() and other.exists() else None
            )
        vals = [x for x in row["rms"].values() if x is not None]
        row["spread"] = max(vals) if vals else None
        out.images[fig] = row
    for name, d in runs:
        try:
            cmps = golden.check(d / "executed", golden_dir)
            diffs = [x.describe() for c in cmps for x in c.differences]
        except printed.GoldenError as exc:
            cmps, diffs = [], [str(exc)]
        img = images.check(d / "figures", write_diffs=False)
        if only:
            img = [r for r in img if r.fig_id in only]
        out.checks[name] = {
            "golden_ok": not diffs,
            "golden_differences": diffs,
            "numbers": sum(c.compared for c in cmps),
            "images_ok": all(r.ok for r in img),
            "image_failures": [r.describe() for r in img if not r.ok],
            "run_ok": json.loads((d / "config.json").read_text()).get("returncode") == 0,
        }
    return out


def suggestions(col: Collected) -> list[str]:
    """Printed numbers whose tolerance is less than SAFETY times their measured spread."""
    out = []
    for key, row in col.printed.items():
        spread = row["spread"]
        if spread is None or spread == 0:
            continue
        tol = row["tol"]
        if tol is None or tol < printed.SAFETY * spread * (1 - 1e-6):  # not float noise
            out.append(
                f"{key} ({row['where']}): spread {spread:.3g} over "
                f"{len(row['values'])} configurations, tolerance "
                f"{'exact' if tol is None else f'{tol:.3g}'}; suggested "
                f"{max(printed.SAFETY * spread, row['floor']):.3g}"
            )
    return out


def write_report(col: Collected, path: Path = REPORT) -> Path:
    state = provenance.git_state()
    data = {
        "schema": 1,
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": state.get("commit"),
        "dirty": state.get("dirty"),
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu": _cpu_name(),
            "cpus": os.cpu_count(),
        },
        "profile": "quick",
        "safety": printed.SAFETY,
        "configs": col.configs,
        "printed": col.printed,
        "claims": col.claims,
        "images": col.images,
        "checks": col.checks,
    }
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True))
    return path


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.qa.reproducibility",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--configs",
        nargs="+",
        default=list(CONFIGS),
        metavar="NAME",
        help=f"configurations, the first is the reference (default: all: {' '.join(CONFIGS)})",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="collect the runs already in _build/repro/ instead of running them again",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="FIG",
        help="run these figures alone (after a change to them); the report then goes to "
        "results/reproducibility/only.json unless --report says otherwise, so the book's "
        "page keeps the full one",
    )
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument(
        "--adopt",
        metavar="NAME=DIR",
        action="append",
        default=[],
        help="take configuration NAME from the finished run in DIR instead of running it again "
        "(e.g. native=_build/test, the run of make test), when its record shows the same "
        "configuration: every figure, the quick profile, this commit with no uncommitted "
        "change, an empty cache at the start (tools.qa.adopt); otherwise NAME is run",
    )
    args = parser.parse_args(argv)
    adopt: dict[str, Path] = {}
    for item in args.adopt:
        name, sep, folder = item.partition("=")
        if not sep or name not in CONFIGS or not folder:
            print(
                f"error: --adopt {item!r}: NAME=DIR with NAME in {list(CONFIGS)}", file=sys.stderr
            )
            return 2
        if CONFIGS[name].env:
            print(
                f"error: --adopt {name}: only a configuration that sets nothing (native) "
                f"can be a plain run",
                file=sys.stderr,
            )
            return 2
        adopt[name] = Path(folder)
    if args.report is None:
        args.report = REPORT.with_name("only.json") if args.only else REPORT
    unknown = [n for n in args.configs if n not in CONFIGS]
    if unknown:
        print(f"error: unknown configuration(s) {unknown}; known: {list(CONFIGS)}", file=sys.stderr)
        return 2
    names = []
    for name in dict.fromkeys(args.configs):
        why = CONFIGS[name].available()
        if why:
            print(f"skip {name}: {why}")
            continue
        names.append(name)
    for k, name in enumerate(names, 1):
        if args.reuse and (run_dir(name) / "config.json").exists():
            print(f"[{k}/{len(names)}] {name}: reusing {run_dir(name).relative_to(paths.ROOT)}")
            continue
        if name in adopt and not args.only:
            try:
                adopt_run(CONFIGS[name], adopt[name])
                print(f"[{k}/{len(names)}] {name}: the run in {adopt[name]} (same configuration)")
                continue
            except AdoptError as err:
                print(f"[{k}/{len(names)}] {name}: not adopted ({err}); running it")
        print(
            f"[{k}/{len(names)}] {name} ({CONFIGS[name].label}): quick profile, empty cache ...",
            flush=True,
        )
        d = run_config(CONFIGS[name], jobs=args.jobs, only=args.only)
        meta = json.loads((d / "config.json").read_text())
        p = meta["probe"]
        print(
            f"    numpy {'/'.join(p['numpy_features']) or '-'}, OpenBLAS {p['openblas_core']}, "
            f"torch {p['torch_capability']} (products: {p.get('torch_products', '?')}); "
            f"runner exit {meta['returncode']}",
            flush=True,
        )
    col = collect(names, only=args.only)
    path = write_report(col, args.report)
    bad = 0
    for name, chk in col.checks.items():
        ok = chk["run_ok"] and chk["golden_ok"] and chk["images_ok"]
        bad += not ok
        print(
            f"{'ok  ' if ok else 'FAIL'} {name:22s} runner {'ok' if chk['run_ok'] else 'FAILED'}, "
            f"golden numbers {'ok' if chk['golden_ok'] else 'DIFFER'} ({chk['numbers']}), "
            f"images {'ok' if chk['images_ok'] else 'DIFFER'}"
        )
        for line in chk["golden_differences"] + chk["image_failures"]:
            print(f"     {line}")
    moving = [k for k, r in col.printed.items() if r["spread"]]
    print(
        f"{len(col.printed)} printed numbers, {len(moving)} differ between configurations; "
        f"{sum(c['digits'] is None for c in col.claims.values())} of {len(col.claims)} claims "
        f"bitwise equal"
    )
    sugg = suggestions(col)
    if sugg:
        print(f"{len(sugg)} tolerance(s) do not cover {printed.SAFETY:g} x the measured spread:")
        for line in sugg:
            print(f"  {line}")
        print(
            "  review, then: python -m tools.qa.golden_update tolerances "
            f"{path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path} "
            "--reason '...'"
        )
    print(f"report: {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

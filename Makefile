# ntp-companion: `make book` and `make test` are all a fresh clone needs.
#
#   make book [PROFILE=paper|quick] [JOBS=2] [ORDER=reuse|registry]
#                                              venv + installs, every notebook, strict book build
#   make test                                  unit/theory tests, registry checks, quick notebooks
#                                              compared with tests/golden/ within tolerances, nbval
#   make golden [REASON="..."]                 rewrite tests/golden/ (says what moved; a move
#                                              beyond tolerance needs REASON)
#   make reproducibility [REPRO="native ..."]  quick profile under several floating-point paths
#   make mutations                             deliberate scientific errors: are they all caught?
#   make mutants                               code-level mutants of the science modules, the
#                                              figures as the test (a developer's tool, not CI)
#   make pdf                                   the whole book as one PDF (after make book)
#   make install | notebooks | html | check-book | browser-test | bench | bench-scaling | lint
#   make browser-self-test | browser-check    the browser check's two halves (browser-test runs both)
#   make dev | clean
#   make book TORCH_INDEX=<url>                torch from that index (default: the CPU build)
#
# Note: MPLBACKEND is deliberately not exported (it would leak into the kernels and
# remove the inline figures from the executed-notebook pages).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= paper
JOBS ?= 2
ORDER ?= reuse
# torch: TORCH_SPEC is the requirement, TORCH_INDEX the index pip takes it from.  Left empty,
# the CPU build is installed: from a local wheel when pip's configuration provides one, else
# on Linux from the PyTorch CPU index, elsewhere from PyPI (CPU on macOS and Windows).  A
# CUDA build: TORCH_INDEX=https://download.pytorch.org/whl/cu128 (or https://pypi.org/simple).
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
STAMP := $(VENV)/.installed
TEST_OUT := _build/test
export PYTHONHASHSEED := 0
export OMP_NUM_THREADS := 1

define COMPILE_TORCH
import compileall, importlib.metadata as m
for f in m.files("torch"):
    if f.suffix == ".py":
        compileall.compile_file(str(f.locate()), force=True, quiet=2)
endef
export COMPILE_TORCH

.PHONY: help install book book-from-test notebooks html pdf test unit nbval golden reproducibility mutations mutants \
        check-book browser-test browser-self-test browser-check browser-deps bench bench-scaling lint dev clean distclean

help:
	@sed -n '2,20p' Makefile

install: $(STAMP)

# torch first (CPU build unless TORCH_INDEX names another), so that the second install never
# pulls CUDA wheels.  TORCH_SPEC and TORCH_INDEX are split into separate pip arguments.
# torch's 2,371 Python files are compiled to bytecode as pip would (one after another,
# skipping one that this Python cannot compile), but on the other core while the second
# install runs: on 2 cores, `make install` 76 s instead of 102 s (alternating runs, medians
# of two, ratio 0.74).
$(STAMP): pyproject.toml setup.py ntpcore/att/_steps.c ntpcore/geo/train/_adamw.c \
          ntpcore/geo/models/_fused.c \
          ntpcore/geo/models/_fused_kernels.h requirements/constraints.txt
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	index='$(TORCH_INDEX)'; \
	case '$(TORCH_SPEC)' in *--*) ;; *) \
	  if [ -z "$$index" ] && [ "$$(uname -s)" = Linux ] && ! $(PY) -m pip install --quiet \
	      --dry-run --no-index --no-deps $(TORCH_SPEC) >/dev/null 2>&1; then \
	    index='$(TORCH_CPU_INDEX)'; fi;; \
	esac; \
	echo "installing $(TORCH_SPEC)$${index:+ from $$index}"; \
	$(PY) -m pip install --quiet --no-compile $(TORCH_SPEC) $${index:+--index-url "$$index"}
	$(PY) -c "$$COMPILE_TORCH" & compiling=$$!; rc=0; \
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e ".[book,runner,test]" \
	  || rc=$$?; \
	wait $$compiling || rc=$$?; exit $$rc
	$(PY) -c "from ntpcore.att import compiled as c; from ntpcore.geo.train import numpy_ufm as u; \
	  print('attention descent steps:', 'compiled' if c.available() else 'numpy (' + c.unavailable_reason() + ')'); \
	  from ntpcore.geo.models import fused as f; \
	  print('UFM AdamW step:', u.adamw_kernel()); \
	  print('transformer attention, RMSNorm, SwiGLU:', f.kernel() if f.kernel() == 'compiled' else 'torch (' + f.unavailable_reason() + ')'); \
	  print('transformer and LSTM products (float32, CPU):', f.product())"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ntp-companion)" >/dev/null
	touch $@

notebooks: $(STAMP)
	mkdir -p _build
	$(PY) -m ntpcore.reproduce --profile $(PROFILE) --jobs $(JOBS) --order $(ORDER)

html: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

book: notebooks html

# The quick book from make test's run (tools/qa/adopt.py: every figure, this commit, no
# uncommitted change), without executing the notebooks again; else from a new quick run.
book-from-test: $(STAMP)
	$(PY) -m tools.qa.adopt $(TEST_OUT) --to-book || $(MAKE) notebooks PROFILE=quick
	$(MAKE) html

# The whole book as one PDF (_build/latex/ntp-companion.pdf), from the executed notebooks of
# the last `make book` (or `make notebooks`): Sphinx's LaTeX builder, then latexmk with
# XeLaTeX.  Needs TeX Live with XeLaTeX and the FreeFont fonts (Debian: texlive-xetex
# texlive-latex-extra texlive-fonts-recommended latexmk fonts-freefont-otf).
pdf: $(STAMP)
	$(VENV)/bin/jupyter-book build . --builder pdflatex --keep-going
	@echo "The PDF is at $(CURDIR)/_build/latex/ntp-companion.pdf"

# Tests: pytest (unit, theory, oracle, registry lint) on $(JOBS) workers (pytest-xdist; the tests
# marked long start first and a worker that runs out takes half of the other's queue), then
# every registered notebook in the quick profile into _build/test (so the book's own figures
# are untouched), each executed once: every number the cells tagged nbval-check-output print
# is compared with tests/golden/ within its measured tolerance and every figure with its
# baseline image; then nbval compares the words of those cells in the same executed copies
# with the golden text (numbers masked: they were compared above), replaying each cell's
# outputs instead of executing the notebook again (tools/qa/nbval_replay.py).
test: unit nbval

unit: $(STAMP)
	$(PY) -m pytest -m "not slow and not paper" -q -n $(JOBS) --dist worksteal

nbval: $(STAMP)
	mkdir -p $(TEST_OUT)
	NTP_FIGURE_DIR=$(TEST_OUT)/figures NTP_EXECUTED_DIR=$(TEST_OUT)/executed \
	  $(PY) -m ntpcore.reproduce --profile quick --jobs $(JOBS)
	$(PY) -m tools.qa.golden check $(TEST_OUT)/executed --figures $(TEST_OUT)/figures
	$(PY) -m tools.qa.golden inject $(TEST_OUT)/executed $(TEST_OUT)/nbval
	$(PY) -m pytest -o addopts="" -p no:cacheprovider -p tools.qa.nbval_replay \
	  --nbval-replay $(TEST_OUT)/executed --nbval-lax --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_numbers.cfg -q $(TEST_OUT)/nbval

# Golden outputs (tests/golden/): the numbers and words the tagged cells print, with each
# measured number's tolerance, and the baseline images.  Prints every number that moves;
# a move beyond tolerance is refused unless REASON says why (logged in tests/golden/CHANGES.md).
golden: $(STAMP)
	mkdir -p $(TEST_OUT)
	NTP_FIGURE_DIR=$(TEST_OUT)/figures NTP_EXECUTED_DIR=$(TEST_OUT)/executed \
	  $(PY) -m ntpcore.reproduce --profile quick --jobs $(JOBS)
	$(PY) -m tools.qa.golden_update update $(TEST_OUT)/executed --figures $(TEST_OUT)/figures \
	  $${REASON:+--reason "$$REASON"}

# The quick profile under several floating-point configurations, each from an empty cache:
# spreads of every printed number, claim and figure, each run checked against the goldens
# (results/reproducibility/report.json, shown on the book's Reproducibility page).
REPRO ?= native numpy-kernels numpy-avx2 numpy-baseline openblas-nehalem openblas-sandybridge \
         openblas-haswell openblas-skylakex threads-2 torch-avx2 torch-default \
         mkl-compatible sandybridge-baseline haswell-threads-2 no-compiled-mkl
# REPRO_ADOPT=native=_build/test takes the native configuration from make test's run when its
# record shows the same configuration (tools/qa/adopt.py), instead of running it again.
REPRO_ADOPT ?=
reproducibility: $(STAMP)
	$(PY) -m tools.qa.reproducibility --configs $(REPRO) --jobs $(JOBS) \
	  $(if $(REPRO_ADOPT),--adopt $(REPRO_ADOPT))

# The mutation catalogue (tests/mutations/): each deliberate error runs its figures in the
# quick profile from an empty cache and must fail a claim, a golden number or a baseline
# image; ends with "mutation score: K/N killed" (results/mutations/report.json, Claims page).
mutations: $(STAMP)
	$(PY) -m tools.qa.mutations --jobs $(JOBS)

# Code-level mutants (tools/qa/mutants.py): mutmut's operators change one thing at a time in
# the science modules; a fixed-seed sample of the changes on lines a figure executes runs
# those figures in the quick profile; a change is killed when a figure fails.  Ends with
# "code-level mutants: K/N killed" (results/mutants/report.json, Claims page).  A developer's
# tool, not part of CI.  mutmut goes into _build/mutmut/tool (pins: requirements/mutmut.txt),
# never into the project's environment.  MUTANTS_ARGS="--paper lin --sample 40" for one room.
MUTMUT_TOOL := _build/mutmut/tool
$(MUTMUT_TOOL)/.installed: requirements/mutmut.txt $(STAMP)
	rm -rf $(MUTMUT_TOOL)
	$(PY) -m pip install --quiet --no-deps --target $(MUTMUT_TOOL) -r requirements/mutmut.txt
	touch $@

MUTANTS_ARGS ?=
mutants: $(STAMP) $(MUTMUT_TOOL)/.installed
	PYTHONPATH=$(CURDIR)/$(MUTMUT_TOOL) $(PY) -m tools.qa.mutants --jobs $(JOBS) $(MUTANTS_ARGS)

# Strict nbval: every text output of the book's executed notebooks must reproduce.
check-book: $(STAMP)
	NTP_PROGRESS=0 NTP_FIGURE_DIR=$(TEST_OUT)/nbval-figures $(PY) -m pytest -o addopts="" -p no:cacheprovider \
	  --nbval --nbval-current-env --nbval-cell-timeout=3600 --nbval-sanitize-with tests/nbval_sanitize.cfg -q book/executed

# The checker's negative controls first (pages it must fail), then the book.
browser-test: browser-self-test browser-check

# The checker's negative controls alone (pages it must fail; no book needed, so CI runs them
# while the book builds), and the built book alone.
browser-self-test: browser-deps
	node tests/browser/check_book.mjs --self-test

browser-check: browser-deps
	node tests/browser/check_book.mjs _build/html

browser-deps:
	test -d node_modules/playwright-core || npm ci --no-audit --no-fund

# Benchmarks (long: the generic solvers run until they pass BENCH_LIMIT seconds), then the
# book is rebuilt so that its Performance page shows the new numbers.
BENCH_LIMIT ?= 600
bench: $(STAMP)
	$(PY) -m tools.bench --max-seconds $(BENCH_LIMIT)
	@if ls book/executed/*.ipynb >/dev/null 2>&1; then $(MAKE) html; \
	else echo "Run make book to build the book with the Performance page."; fi

# The nuclear-norm SVM's time and peak memory against m (V = 1000, m up to 20000, every
# support law), and the largest m one machine certifies in 10 minutes: about an hour, one core.
bench-scaling: $(STAMP)
	$(PY) -m tools.bench --only geo-scaling

lint: $(STAMP)
	$(VENV)/bin/ruff check ntpcore tests book/_ext
	$(VENV)/bin/ruff format --check ntpcore tests book/_ext

# Developer set-up: strip notebook outputs on commit (keeping tags and papermill metadata out).
dev: $(STAMP)
	$(VENV)/bin/nbstripout --install --attributes .gitattributes
	git config filter.nbstripout.extrakeys \
	  "metadata.papermill cell.metadata.papermill cell.metadata.execution metadata.widgets"

clean:
	rm -rf _build book/executed book/figures

distclean: clean
	rm -rf $(VENV) node_modules results *.egg-info

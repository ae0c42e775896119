# The two commands of the README (`make serve`, `make test`) and the steps
# they stand on. Every step installs what it needs into .venv/ and
# node_modules/, so a fresh clone needs only python3 (3.10+), npm and make.

VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1:8000
# The CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

export NO_MKDOCS_2_WARNING := 1

.PHONY: setup serve build test test-oldest-torch lint lint-ja notebooks check-chapter lab lab-en lab-ja test-notebooks-clean bench-pages pdf clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml lab/pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[test,triton]' -e ./lab
	touch $@

# From the npm registry, pinned by package-lock.json: mathjax-full (the
# build typesets every formula in node, so no page loads MathJax), the Noto
# Sans JP webfont (copied into site/ for Japanese pages), vega-lite (compiles
# the interactive figures at build time) and vega (their runtime, copied into
# site/ for the pages that show one), textlint and its presets (make lint-ja)
# and axe-core (the accessibility test).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

serve: setup
	$(VENV)/bin/mkdocs serve --dev-addr $(HOST)

build: setup
	$(VENV)/bin/mkdocs build --strict

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# textlint on the Japanese prose (ja cells, Japanese alt text, docs/*.ja.md),
# math and code masked, terms checked against docs/glossary.ja.md; one line
# per message, path:line:column of the source. FILES="notebooks/01-sinusoidal.py
# docs/index.ja.md" lints only those. Config: .textlintrc.yml.
FILES ?=
lint-ja: setup
	$(PY) -m tools.lint_ja $(FILES)

# Runs the whole suite: unit and property tests, notebook pairing and
# nbval (strict), the site build and the headless-browser checks, on one
# worker per core (tests/conftest.py keeps each notebook, and the site
# tests, on one worker). WORKERS=0 runs it in one process.
WORKERS ?= auto
test: lint
	$(VENV)/bin/python -m pytest -n $(WORKERS)

# The library's tests on the oldest torch that pyproject.toml allows (the
# floor of `dependencies`, read from there), in an environment of its own:
# the floor is a promise, this keeps it. Only the library's tests
# (tests/test_*.py): the site, notebook and lab tests need the current
# stack. Tests of a feature that older torch lacks say so and skip
# (tests/conftest.py, needs_torch). PyPI's torch wheel for Linux is a CUDA
# build of several GB that runs on the CPU; CI runs this as a job of its own.
OLDEST_VENV  ?= .venv-oldest-torch
OLDEST_TORCH = $(shell python3 -c "import re, tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print(next(re.match(r'torch>=([0-9.]+)', d)[1] for d in deps if d.startswith('torch>=')))")
test-oldest-torch:
	python3 -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet torch==$(OLDEST_TORCH) 'numpy<2'
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e '.[test]'
	$(OLDEST_VENV)/bin/python -c "import torch; assert torch.__version__.split('+')[0] == '$(OLDEST_TORCH)', torch.__version__"
	$(OLDEST_VENV)/bin/python -m pytest -n $(WORKERS) -p no:nbval -o addopts= tests/test_*.py

# JupyterLab on the chapters, on 127.0.0.1 (tools/lab.py). `make lab` opens
# notebooks/: a chapter's .ipynb opens as one notebook paired with its .py
# (jupytext.toml), and saving writes both. `make lab-en` and `make lab-ja`
# open one-language copies generated into notebooks-en/ and notebooks-ja/
# (read-only: edit the chapter in notebooks/). The switch is a target, not
# a variable: LANG and LANGUAGE are set by most shells. LAB_ARGS passes
# options to JupyterLab, e.g. LAB_ARGS="--port=8890 --no-browser".
LAB_ARGS ?=
lab: setup
	$(PY) -m tools.lab $(LAB_ARGS)

lab-en lab-ja: lab-%: setup
	$(PY) -m tools.lab --lang $* $(LAB_ARGS)

# Every chapter's downloadable notebook (the one Colab opens), run in an
# empty folder in a fresh environment that holds only the posenc and
# posenc-lab wheels (tests/notebooks/test_clean_run.py): 5 minutes in one
# process on 2 cores. `make test` runs one chapter of it.
test-notebooks-clean: setup
	CLEAN_CHAPTERS=all $(PY) -m pytest -n $(WORKERS) tests/notebooks/test_clean_run.py

# Re-execute notebooks from their .py sources (NB=notebooks/01-sinusoidal.py
# for one). Outputs are deterministic, so an unchanged chapter gives a
# byte-identical .ipynb: no timings are recorded, and stream outputs are
# merged after execution (the kernel may split one cell's prints anywhere).
NB ?= $(wildcard notebooks/[0-9]*.py)
notebooks: setup
	@for py in $(NB); do \
	  echo "executing $$py"; \
	  $(VENV)/bin/jupytext --quiet --to ipynb --update "$$py" && \
	  $(VENV)/bin/jupyter nbconvert --log-level=WARN --to notebook --execute --inplace \
	    --ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=600 \
	    --NotebookExporter.preprocessors=nbconvert.preprocessors.CoalesceStreamsPreprocessor \
	    "$${py%.py}.ipynb" || exit 1; \
	done

# How long heavy chapter pages take to render in headless Chromium (builds
# the site first); a measurement to compare before and after a change on one
# machine, not a test. ROUNDS=5 fresh browser profiles.
ROUNDS ?= 5
bench-pages: setup
	$(PY) tools/page_speed.py --rounds $(ROUNDS)

# Every rule of CONTRIBUTING.md for a chapter (NB=notebooks/NN-slug.py; all
# chapters without NB), each failure with how to fix it. nbval and the site
# are make test's.
check-chapter: setup
	$(PY) -m tools.check_chapter $(NB)

# The whole book as one PDF per language, posenc-en.pdf and posenc-ja.pdf
# (hooks/book.py writes the book pages, docs/stylesheets/print.css sets them
# in A4 pages): builds the site, prints both books with headless Chromium,
# then reads each PDF back (poppler-utils) and checks it: every chapter's
# title starts a page, in order; no page ends with a heading; no page is
# mostly blank but a chapter's last. SITE=DIR prints a site built before.
SITE ?=
pdf: setup
	$(PY) tools/book_pdf.py $(if $(SITE),--site $(SITE))

# The extrapolation experiment, version 2 (lab/README.md). `make corpus`
# installs its real-text corpus, the documentation sources of Debian's
# python3.11-doc (apt, as root or through sudo), and checks the pinned
# SHA-256. `make extrapolation` makes both records (about 90 minutes on two
# idle cores); stopped, the same command goes on where it stopped.
.PHONY: corpus extrapolation
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
corpus: setup
	@test -d /usr/share/doc/python3.11/html/_sources || { $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11-doc; }
	$(PY) -m posenc_lab.extrapolation.corpus

extrapolation: corpus
	nice -n 5 $(PY) -m posenc_lab.extrapolation --jobs 2

clean:
	rm -rf site docs/notebooks .pytest_cache posenc-en.pdf posenc-ja.pdf

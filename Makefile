# verifylab — `make book` renders the book from shipped data; `make test` runs every check.
# Both start from nothing but python3 (>= 3.11), make and the package registries: a local .venv is made.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.verifylab-installed
BOOK_STAMP := $(VENV)/.verifylab-book-installed
# The locks (make lock writes them): the book's environment (no torch, no CUDA wheel), and the tests' (the book's,
# the test tools, Ray, and the CPU build of torch this machine image keeps in /opt/wheels)
BOOK_LOCK := requirements/book.lock
TEST_LOCK := requirements/test.lock
# Bytecode is compiled on first import and kept in $(VENV)/pycache (never beside the sources), also where the
# environment says PYTHONDONTWRITEBYTECODE: without it every process (kernels, ranks, servers) compiles torch,
# pandas and the book stack again, and the tests take 1.6 times as long. The venv keeps the same prefix for calls
# outside make too (install/pycache_prefix.py: a .pth sets it at start-up where the environment sets none).
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

toc: $(BOOK_STAMP)
	$(BIN)/python -m verifylab.publish.toc

.PHONY: toc help install book test test-fleet check fast-tests lint notebooks browser pdf-browser clean live pytest lock

PARAMS ?= examples/params-smoke.yaml

help:
	@echo "make book   - create $(VENV), install $(BOOK_LOCK) (no torch), execute every chapter (replay), render _build/html"
	@echo "make toc    - write _toc.yml (the book's contents) from the chapter registry and the stored runs"
	@echo "make lock   - write both locks again from pyproject.toml (after changing its dependencies)"
	@echo "make test   - create $(VENV), install $(TEST_LOCK) (with Ray and torch's CPU build), lint + the whole suite (browser and"
	@echo "              local Ray cluster tests included)"
	@echo "make check - the fast lane: lint and the unit tests (no book build, no browser)"
	@echo "make test-fleet - install Ray (the fleet extra) and run only verifylab fleet's tests (a local Ray cluster)"
	@echo "make lint   - ruff, mypy on src/, and that each notebook's parameters cell only points to its chapter's Params"
	@echo "make notebooks - write that pointer into each notebook's parameters cell"
	@echo "make live PARAMS=examples/params-case-study.yaml - all chapters in the params' mode, then the edition"
	@echo "make clean  - remove _build and book/_generated (keeps $(VENV))"

# The venv is made without pip (ensurepip took 6 of a fresh `make check`'s seconds): the system's pip (>= 22.3, as
# Python 3.11 ships) installs uv and pip into it with --python.
$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "verifylab needs Python >= 3.11")'
	$(PYTHON) -m venv --without-pip $(VENV)

# uv installs into the venv: it downloads and unpacks in parallel, a fresh install in 15 s where pip takes 60.
# It reads neither pip's configuration nor its find-links, so the local wheels pip is pointed at (a machine's
# CPU build of torch, say) are handed to it; and it trusts the system's certificates, as pip does.
# Bytecode is written on first import, for the modules used (see above).
$(BIN)/uv: | $(BIN)/python
	$(PYTHON) -m pip --python $(BIN)/python install -q uv pip
ifndef UV_FIND_LINKS
UV_FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
endif
ifneq ($(UV_FIND_LINKS),)
export UV_FIND_LINKS
endif
export UV_SYSTEM_CERTS ?= 1
UV_INSTALL := $(BIN)/uv pip install -q --python $(BIN)/python

# Everything from a lock (the exact versions it names, nothing resolved anew), then verifylab itself without deps.
# A lock edited by hand (a pin changed, an index or a URL added) is refused first: install/check_lock.py compares
# it with the digest `make lock` recorded in requirements/SHA256SUMS.
CHECK_LOCK := $(PYTHON) install/check_lock.py
$(STAMP): pyproject.toml $(TEST_LOCK) requirements/SHA256SUMS | $(BIN)/uv
	$(CHECK_LOCK) $(TEST_LOCK)
	$(UV_INSTALL) -r $(TEST_LOCK)
	$(UV_INSTALL) --no-deps -e .
	$(BIN)/python install/pycache_prefix.py $(abspath $(VENV))/pycache >/dev/null
	touch $(STAMP) $(BOOK_STAMP)

$(BOOK_STAMP): pyproject.toml $(BOOK_LOCK) requirements/SHA256SUMS | $(BIN)/uv
	$(CHECK_LOCK) $(BOOK_LOCK)
	$(UV_INSTALL) -r $(BOOK_LOCK)
	$(UV_INSTALL) --no-deps -e .
	$(BIN)/python install/pycache_prefix.py $(abspath $(VENV))/pycache >/dev/null
	touch $(BOOK_STAMP)

install: $(STAMP)

# The locks, after a change of pyproject.toml's dependencies (needs the package index)
lock: | $(BIN)/uv
	$(BIN)/uv pip compile pyproject.toml --extra book --universal --python-version 3.11 -q -o $(BOOK_LOCK)
	$(BIN)/uv pip compile pyproject.toml --extra book --extra dev --extra fleet --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 -q -o $(TEST_LOCK)
	$(CHECK_LOCK) --write $(BOOK_LOCK) $(TEST_LOCK)

book: $(BOOK_STAMP) | pdf-browser
	$(BIN)/verifylab book

# Debian's chromium (never `playwright install`: it downloads a browser), install/chromium.sh: for the book's PDFs
# where apt can (else one line says how, and the HTML book is built without them); required by the browser tests.
pdf-browser:
	@bash install/chromium.sh
browser:
	@bash install/chromium.sh --required

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks notebooks
	$(BIN)/ruff format --check src tests benchmarks notebooks
	$(BIN)/python -m verifylab.chapters.notebook_cell --check notebooks
	$(BIN)/mypy

notebooks: $(STAMP)
	$(BIN)/python -m verifylab.chapters.notebook_cell notebooks

# The lint beside the tests (mypy holds one core for seconds); the bytecode the test workers import is compiled
# once first (in a fresh clone both workers would otherwise compile the same modules at once).
check: $(STAMP)
	$(MAKE) --no-print-directory -j 2 -O lint fast-tests

fast-tests: warm-bytecode-fast
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider -m "not slow and not browser"

# Three workers on CI's two cores: some tests wait (on the Ray cluster, on timeouts they test), and a third worker
# uses that time (a fresh clone's pytest took 148 s against 157-161 s with two). The tests that read the built book
# stay on one worker, so it is built once, and so do the local Ray cluster's tests (one cluster). First the bytecode
# of what the test processes import is compiled once (tests/warm_bytecode.py): in a fresh clone the first workers,
# kernels and ranks would otherwise each compile the same modules at once. The lint runs beside the tests: mypy
# holds one core for seconds, and the tests' waits leave room for it. Chromium's install (apt: mostly waiting on
# the network and the disk) runs beside the venv's install and the bytecode warm-up, not before them.
test:
	$(MAKE) --no-print-directory -j 3 -O browser warm-bytecode-torch warm-bytecode-book
	$(MAKE) --no-print-directory -j 2 -O lint pytest

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

warm-bytecode-%: $(STAMP)
	$(BIN)/python tests/warm_bytecode.py $*

# verifylab fleet against a real local Ray cluster (a head and two nodes): installs the fleet extra (Ray) first.
test-fleet: $(STAMP)
	$(BIN)/python -m pytest -q -m fleet tests/test_fleet.py

live: $(STAMP)
	$(BIN)/verifylab run --params $(PARAMS)

clean:
	rm -rf _build book/_generated

# gnnscale developer entry points. `make demo` and `make test` bootstrap .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
# Python writes the bytecode of gnnscale's modules (in ignored __pycache__ folders) even where
# the environment says not to: without it every process compiles about 100 modules from source
# again, and the suite starts hundreds of processes (docs/test-suite.md).
unexport PYTHONDONTWRITEBYTECODE

# The DGL environment: DGL 2.1.0 (the newest on PyPI) runs only with torch <= 2.2.1 and numpy < 2,
# so DGL interop and a 2-rank training smoke test run in a second virtual environment, built
# once from the pins in $(DGL_PIN) and reused: it lives outside the repository, under a name
# carrying a hash of the pins and of the Python version, so every checkout on this machine shares
# it and editing the pins builds a new one. It holds only dependencies; tests and benchmarks run
# gnnscale from this checkout through PYTHONPATH. tools/dgl_env.sh builds it atomically (stamp,
# then an atomic symlink; an interrupted build is redone, never half-used) under a lock.
# Override DGL_ENV to use another folder, DGL_ENV_ROOT to move the cache.
DGL_PIN := constraints-dgl.txt
DGL_ENV_ROOT ?= $(HOME)/.cache/gnnscale
DGL_HASH := $(shell { cat $(DGL_PIN); $(PYTHON) -c 'import sys; print(sys.version_info[:2])'; } \
	| sha256sum | cut -c1-12)
DGL_ENV ?= $(DGL_ENV_ROOT)/dgl-env-$(DGL_HASH)
DGL_PY := $(DGL_ENV)/bin/python

.PHONY: venv demo test clean dgl-env dgl-env-path dgl-test slurm

venv: $(STAMP)

# pip compiles no bytecode at install (--no-compile): Python writes each module's on its first
# import, so only the modules the project imports are compiled, in about half the install time.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -c constraints.txt -e '.[dev,mpi-runtime]'
	touch $(STAMP)

demo: venv
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/mpirun -n 4 --oversubscribe -x OMP_NUM_THREADS=1 \
		$(BIN)/gnnscale train --dataset sbm --num-nodes 20000 --hidden 64 --epochs 100

# `make test`: the main suite in .venv and, beside it, the DGL tests (tools/dgl_test.sh, output
# in build/dgl-test.log, printed after the suite; started after the kernel warm-up, so that they
# fill the suite's idle moments instead of slowing the warm-up); either failing fails. pytest
# lists the 10 slowest tests and the 10 that used the most CPU, and the last line is the total
# time. The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per worker at a
# time (module fixtures are built once): much of it waits on launches, sockets and timeouts,
# which the other workers fill (3 on a 2-core host keeps the cores busier than 2;
# docs/test-suite.md); the files run longest first, by the committed profile
# benchmarks/results/test_suite_cpu.json (tests/conftest.py), so that no long file is left for
# the end. TEST_WORKERS=0 runs it in one process. PYTEST_ARGS adds options,
# e.g. PYTEST_ARGS="--cpu-profile suite.json" (every test's CPU and wall seconds, as JSON).
# First tools/slurm.sh installs Slurm where it can (root with apt-get) for the test that runs
# the README's batch script; where it cannot, that test skips and says why. Then
# tests/kernel_warmup.py compiles the numba kernels once, one process per core, so that the
# suite's many processes load them from numba's cache instead of each compiling its own.
MAKE_START := $(shell date +%s)
ELAPSED = $$(( $$(date +%s) - $(MAKE_START) )) s
TEST_WORKERS ?= 3
PYTEST_ARGS ?=
DGL_TEST_LOG := build/dgl-test.log
test: venv
	@bash tools/slurm.sh || true
	@$(BIN)/python tests/kernel_warmup.py; \
	mkdir -p build; bash tools/dgl_test.sh "$(DGL_ENV)" "$(DGL_PIN)" "$(PYTHON)" > $(DGL_TEST_LOG) 2>&1 & \
	dgl=$$!; \
	PATH=$(CURDIR)/$(BIN):$$PATH OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
		-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=10 $(PYTEST_ARGS) tests; \
	suite=$$?; wait $$dgl; dgl_rc=$$?; \
	echo "DGL tests ($(DGL_TEST_LOG)):"; cat $(DGL_TEST_LOG); \
	if [ $$suite -ne 0 ] || [ $$dgl_rc -ne 0 ]; then echo "make test: FAILED after $(ELAPSED)"; exit 1; fi
	@echo "make test: passed in $(ELAPSED)"

# Slurm for tests/cli/test_sbatch_script.py (`make test` does this itself).
slurm:
	@bash tools/slurm.sh

dgl-env:
	@bash tools/dgl_env.sh "$(DGL_ENV)" "$(DGL_PIN)" "$(PYTHON)"

# Prints the environment's folder, e.g. `PYTHONPATH=. $$(make -s dgl-env-path)/bin/python
# benchmarks/engine_vs_dgl.py` (run `make dgl-env` first).
dgl-env-path:
	@echo "$(DGL_ENV)"

# tests/dgl_env in the DGL environment (under a minute once it exists); tools/dgl_test.sh says
# what fails and what skips (DGL_ENV_REQUIRED=1: an environment that cannot be built fails).
dgl-test:
	@bash tools/dgl_test.sh "$(DGL_ENV)" "$(DGL_PIN)" "$(PYTHON)"

clean:
	rm -rf $(VENV) build *.egg-info

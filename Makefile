# gnnscale developer entry points. `make demo` and `make test` bootstrap .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: venv demo test clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,mpi-runtime]'
	touch $(STAMP)

demo: venv
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/mpirun -n 4 --oversubscribe -x OMP_NUM_THREADS=1 \
		$(BIN)/gnnscale train --dataset sbm --num-nodes 20000 --hidden 64 --epochs 100

test: venv
	PATH=$(CURDIR)/$(BIN):$$PATH OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests

clean:
	rm -rf $(VENV) build *.egg-info

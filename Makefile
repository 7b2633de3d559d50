# Two entry points a fresh machine needs: `make serve` and `make test`.
# Each installs into one virtual environment (.venv) what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test lint node circuits native

# Every install takes the exact versions in constraints.txt (scripts/freeze_constraints.py).
# `make serve` installs the runtime only (.runtime); `make test` adds the test tools and the
# CUDA compiler toolchain the PTX checks need (.installed), which also covers serve.
$(BIN)/.runtime: pyproject.toml constraints.txt
	@echo "Installing cuzk's runtime dependencies into $(VENV) (about 410 MB; a few minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar on -c constraints.txt -e .
	touch $@

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,ptx,cluster]'
	touch $@ $(BIN)/.runtime

# The native MSM and QAP extensions (cuzk/prover/_native), rebuilt in place when their sources
# change (an editable install builds them too; this catches an existing venv and edited sources).
NATIVE := cuzk/prover/_native/.built
$(NATIVE): $(BIN)/.runtime setup.py $(wildcard cuzk/prover/_native/*.c cuzk/prover/_native/*.h)
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

native: $(NATIVE)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

node: node_modules/.installed

serve: $(BIN)/.runtime $(NATIVE)
	$(BIN)/cuzk serve

test: $(BIN)/.installed $(NATIVE) node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

circuits: node_modules/.installed
	bash scripts/build_circuits.sh

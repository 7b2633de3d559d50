# Two entry points a fresh machine needs: `make serve` and `make test`.
# Each creates its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test lint node circuits native

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ptx]'
	touch $@

# The native MSM extension (cuzk/prover/_native), rebuilt in place when its sources change
# (pip install -e builds it too; this catches an existing venv and edited C sources).
NATIVE := cuzk/prover/_native/.built
$(NATIVE): $(BIN)/.installed setup.py $(wildcard cuzk/prover/_native/*.c cuzk/prover/_native/*.h)
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

native: $(NATIVE)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

node: node_modules/.installed

serve: $(BIN)/.installed $(NATIVE)
	$(BIN)/cuzk serve

test: $(BIN)/.installed $(NATIVE) node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check .

circuits: node_modules/.installed
	bash scripts/build_circuits.sh

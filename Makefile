# Two entry points a fresh machine needs: `make serve` and `make test`.
# Each creates its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test lint node circuits

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ptx,cluster]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

node: node_modules/.installed

serve: $(BIN)/.installed
	$(BIN)/cuzk serve

test: $(BIN)/.installed node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check .

circuits: node_modules/.installed
	bash scripts/build_circuits.sh

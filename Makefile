# hpcval: the two commands of the README, and what they need.
#   make validate   set up, then run the checks on the embedded `local` site
#   make test       set up, then lint and run the test suite
PYTHON ?= python3
VENV   ?= .venv
SITE   ?= local
BIN    := $(VENV)/bin

.PHONY: setup validate test lint clean

setup: $(VENV)/.hpcval-installed

$(VENV)/.hpcval-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[impi,dev]'
	touch $@

validate: setup
	$(BIN)/hpcval validate --site $(SITE)

lint: setup
	$(BIN)/ruff check src reframe-checks site-configs tests

test: lint
	$(BIN)/pytest -ra

clean:
	rm -rf $(VENV) var

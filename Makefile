# hpcval: the two commands of the README, and what they need.
#   make validate   set up, then run the checks on the embedded `local` site
#   make test       set up, then lint and run the test suite
PYTHON ?= python3
VENV   ?= .venv
SITE   ?= local
BIN    := $(VENV)/bin

# Debian packages the lab (Slurm in network namespaces, sshfs file server) needs; as root only.
SYSTEM_PACKAGES := slurm-wlm munge libpmi2-0 iproute2 sshfs openssh-server

.PHONY: setup system-deps validate test lint clean

setup: $(VENV)/.hpcval-installed

$(VENV)/.hpcval-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[impi,wrf,dev]'
	$(BIN)/hpcval spack externals >/dev/null  # environments/*/intel-mpi-venv.yaml
	touch $@

system-deps:
	@if [ "$$(id -u)" != 0 ]; then echo "system-deps: needs root (apt-get)"; exit 1; fi
	dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); }

validate: setup
	$(BIN)/hpcval validate --site $(SITE)

lint: setup
	$(BIN)/ruff check src reframe-checks site-configs tests

test: lint
	$(BIN)/pytest -ra

clean:
	rm -rf $(VENV) var

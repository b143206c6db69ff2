# hpcval: the two commands of the README, and what they need.
#   make validate   set up, then run the checks on the embedded `local` site
#   make test       set up, then lint and run the test suite
PYTHON ?= python3
VENV   ?= .venv
SITE   ?= local
BIN    := $(VENV)/bin

# Debian packages the lab (Slurm in network namespaces, sshfs file server, link delay) needs, and what the
# Spack environments `local` and `lab` declare as externals (environments/local/spack.yaml: gcc,
# g++, gfortran, Open MPI, make, autotools, pkgconf; the `local` site also runs Debian's MPICH),
# and the monitoring the export and the alerting rules are tested with (Prometheus and its
# promtool, node_exporter, Pushgateway: the tests start their own daemons on free loopback ports,
# beside any service the packages start; docs/scheduling.md); as root only.
SYSTEM_PACKAGES := slurm-wlm munge libpmi2-0 iproute2 sshfs openssh-server \
	libnetfilter-queue-dev iptables \
	gcc g++ gfortran make autoconf automake libtool libtool-bin m4 pkgconf \
	openmpi-bin libopenmpi-dev mpich libmpich-dev chromium \
	prometheus prometheus-node-exporter prometheus-pushgateway libopenblas0-pthread

.PHONY: setup system-deps lock validate test lint clean

setup: $(VENV)/.hpcval-installed

$(VENV)/.hpcval-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[impi,wrf,dev]'
	$(BIN)/hpcval spack externals >/dev/null  # environments/*/intel-mpi-venv.yaml, local and lab stream-size.yaml
	touch $@

system-deps:
	@if [ "$$(id -u)" != 0 ]; then echo "system-deps: needs root (apt-get)"; exit 1; fi
	dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); }

# Concretize every Spack environment (one at a time, minutes each) and rewrite its spack.lock
# (local's and lab's record this checkout's paths: made here, git-ignored);
# ENV=<name> for one. Needs Spack (docs/spack.md).
lock: setup
	$(BIN)/hpcval spack lock $(if $(ENV),--env $(ENV))

validate: setup
	$(BIN)/hpcval validate --site $(SITE)

lint: setup
	$(BIN)/ruff check src reframe-checks site-configs tests

test: lint
	$(BIN)/pytest -ra

clean:
	rm -rf $(VENV) var

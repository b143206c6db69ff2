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

# BUNDLE=DIR: install offline from a folder `hpcval offline bundle` made (docs/spack.md,
# section 1): its SHA256SUMS is checked first, pip reads only its wheels/ (and also installs
# clingo, Spack's concretizer, from them), apt only its debs/.
# (pip's own configuration and PIP_* variables are set aside, so that nothing else is read)
ifdef BUNDLE
PIP_FROM   := --no-index --find-links $(abspath $(BUNDLE))/wheels
PIP_ENV    := env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null
CHECK_BUNDLE = @cd $(BUNDLE) && sha256sum --quiet --strict -c SHA256SUMS && \
	echo "$(BUNDLE): every file of SHA256SUMS checked"
# the wheels are for one Python (BUNDLE.json's python_version): another one is named, exit 2
CHECK_PYTHON = @have=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') && \
	want=$$(sed -n 's/.*"python_version": "\([0-9.]*\)".*/\1/p' $(BUNDLE)/BUNDLE.json) && \
	if [ "$$have" != "$$want" ]; then echo "setup: BUNDLE=$(BUNDLE) holds wheels for Python \
	$$want, $(PYTHON) is Python $$have: give PYTHON=python$$want, or a bundle made with \
	--python-version $$have" >&2; exit 2; fi
endif

.PHONY: setup system-deps lock validate test lint clean

setup: $(VENV)/.hpcval-installed

$(VENV)/.hpcval-installed: pyproject.toml
	$(CHECK_BUNDLE)
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(PIP_ENV) $(BIN)/pip install --quiet $(PIP_FROM) --upgrade pip
	$(PIP_ENV) $(BIN)/pip install --quiet $(PIP_FROM) -e '.[impi,wrf,dev]'
	$(if $(BUNDLE),$(PIP_ENV) $(BIN)/pip install --quiet $(PIP_FROM) clingo==5.8.3)
	$(BIN)/hpcval spack externals >/dev/null  # environments/*/intel-mpi-venv.yaml, local and lab stream-size.yaml
	touch $@

# With BUNDLE=DIR, apt reads only the bundle's debs/ (a flat repository with its Packages
# index, through a list directory of its own: the system's apt lists are not touched and
# nothing is downloaded); a package already installed at the same or a newer version is kept.
system-deps:
	@if [ "$$(id -u)" != 0 ]; then echo "system-deps: needs root (apt-get)"; exit 1; fi
ifdef BUNDLE
	$(CHECK_BUNDLE)
	@if dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
	    echo "system-deps: all $(words $(SYSTEM_PACKAGES)) packages installed; nothing to install"; \
	elif [ ! -f $(BUNDLE)/debs/Packages ]; then \
	    echo "system-deps: BUNDLE=$(BUNDLE) has no debs/Packages (made with --no-debs?): make a \
	bundle with its Debian packages on a machine of this release" >&2; exit 2; \
	else L=$$(mktemp -d) && chmod 755 $$L && mkdir -p $$L/lists/partial $$L/archives/partial && \
	    echo "deb [trusted=yes] file:$(abspath $(BUNDLE))/debs ./" > $$L/sources.list && \
	    A="-o Dir::Etc::SourceList=$$L/sources.list -o Dir::Etc::SourceParts=$$L/none \
	       -o Dir::State::Lists=$$L/lists -o Dir::Cache::Archives=$$L/archives" && \
	    apt-get $$A -qq update && \
	    DEBIAN_FRONTEND=noninteractive apt-get $$A install -y -qq --no-install-recommends \
	        $(SYSTEM_PACKAGES); rc=$$?; rm -rf $$L; exit $$rc; fi
else
	dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); }
endif

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

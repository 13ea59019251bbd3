# Two commands for a newcomer on a fresh Debian machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# torch is pinned (an unpinned torch pulls a multi-GB CUDA build).
STAMP_BASE := $(VENV)/.installed-base
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test lint format clean venv bench system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[eval]'
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[eval,cache,dev]'
	touch $@ $(STAMP_BASE)

venv: $(STAMP_BASE)

## make demo: create .venv, install, and open the console on the embedded demo cluster.
demo: $(STAMP_BASE)
	$(BIN)/dflash-tui demo --dir .demo --port-base 2221

## make test: create .venv with the dev and eval extras, install system test deps, run everything.
test: $(STAMP_DEV) system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

# sshd and tmux, and the Slurm test bed (slurmctld, slurmd, munge, slurmdbd + MariaDB
# for sacct); installed only where missing. The tests start their own daemons on
# loopback with their own configs, so the system services are not needed
# (RUNLEVEL=1 keeps sysvinit-style installs from starting them).
SYSTEM_PACKAGES := openssh-server tmux procps iproute2 slurmctld slurmd slurm-client munge slurmdbd mariadb-server
SYSTEM_COMMANDS := /usr/sbin/sshd tmux pgrep ip slurmctld slurmd sbatch munged slurmdbd mariadbd

system-deps:
	@missing=""; for c in $(SYSTEM_COMMANDS); do \
		command -v $$c >/dev/null 2>&1 || [ -x "$$c" ] || [ -x "/usr/sbin/$$c" ] || missing="$$missing $$c"; \
	done; \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			echo "installing test bed packages (missing:$$missing)"; \
			$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			$$SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null \
			|| echo "warning: could not install$$missing; the tests that need them will be skipped" >&2; \
		else \
			echo "warning: no apt-get; sshd- and Slurm-based tests will be skipped (missing:$$missing)" >&2; \
		fi; \
	fi

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

format: $(STAMP_DEV)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache

# Two commands for a newcomer on a fresh Debian machine: `make demo` and `make test`.
# Both install exactly the versions in requirements/*.txt (pip-tools locks with hashes);
# `make lock` refreshes those files on purpose. The console needs no torch: `make demo`
# installs it from the public index alone. Only the demo's CPU eval needs torch's CPU build
# (an unpinned torch pulls a multi-GB CUDA build), which is not on the public index: pip
# finds it where its own settings name PyTorch's CPU wheel index or a wheel folder
# (README "The demo's CPU eval"); without it the demo runs, and says so in one line.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
LOCK_DEMO := requirements/demo.txt
LOCK_EVAL := requirements/demo-eval.txt
LOCK_DEV := requirements/dev.txt
STAMP_BASE := $(VENV)/.installed-base
STAMP_DEV := $(VENV)/.installed-dev
STAMP_EVAL := $(VENV)/.installed-eval
PIP_TOOLS := pip-tools==7.6.2
LOCKENV := .lockenv

.PHONY: demo demo-eval test lint types format clean venv bench system-deps lock stress-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The lock holds every package, setuptools included, so the project itself installs
# with no build isolation and no resolve: nothing outside the lock reaches the venv.
$(STAMP_BASE): $(LOCK_DEMO) pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --require-hashes --no-deps -r $(LOCK_DEMO)
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(STAMP_DEV): $(LOCK_DEV) pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --require-hashes --no-deps -r $(LOCK_DEV)
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	touch $@ $(STAMP_BASE) $(STAMP_EVAL)

venv: $(STAMP_BASE)

# The demo's CPU eval: the eval extra (torch==2.13.0+cpu, safetensors) on top of the console.
# The dry run fails in seconds where pip cannot find that torch, before anything is fetched.
$(STAMP_EVAL): $(LOCK_EVAL) $(STAMP_BASE)
	$(PIP) install --quiet --dry-run --require-hashes --no-deps -r $(LOCK_EVAL)
	$(PIP) install --quiet --require-hashes --no-deps -r $(LOCK_EVAL)
	touch $@

## make demo-eval: install torch's CPU build for the demo's evals (README "The demo's CPU eval").
demo-eval: $(STAMP_EVAL)

## make lock: resolve every extra again and rewrite requirements/*.txt (on purpose only).
# demo.txt (the console, and setuptools to install it) and demo-eval.txt (plus the eval
# extra) are resolved within dev.txt, so the files never disagree on a version.
LOCK_FLAGS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
lock:
	[ -x $(LOCKENV)/bin/pip-compile ] || { $(PYTHON) -m venv $(LOCKENV) && $(LOCKENV)/bin/python -m pip install --quiet '$(PIP_TOOLS)'; }
	$(LOCKENV)/bin/pip-compile $(LOCK_FLAGS) --upgrade --extra eval --extra cache --extra dev --extra s3 --extra notify --extra tensorboard -o $(LOCK_DEV) pyproject.toml
	$(LOCKENV)/bin/pip-compile $(LOCK_FLAGS) --upgrade --build-deps-for editable -c $(LOCK_DEV) -o $(LOCK_DEMO) pyproject.toml
	$(LOCKENV)/bin/pip-compile $(LOCK_FLAGS) --upgrade --extra eval -c $(LOCK_DEV) -o $(LOCK_EVAL) pyproject.toml

## make demo: create .venv, install, and open the console on the embedded demo cluster
## (with the CPU eval where pip finds torch's CPU build; else one line says how to get it).
demo: $(STAMP_BASE)
	@$(MAKE) --no-print-directory $(STAMP_EVAL) >$(VENV)/demo-eval.log 2>&1 || \
		echo "make demo: the demo runs without its CPU eval: pip finds no torch 2.13.0+cpu here; README \"The demo's CPU eval\" says how to get it (pip's words: $(VENV)/demo-eval.log)" >&2
	$(BIN)/dflash-tui demo --dir .demo --port-base 2221

## make test: create .venv with the dev and eval extras, install system test deps, run everything
## (the suite on both cores, each test file in one worker: pytest-xdist, --dist loadfile).
test: $(STAMP_DEV) system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

# sshd and tmux, and the Slurm test bed (slurmctld, slurmd, munge, slurmdbd + MariaDB
# for sacct); installed only where missing. The tests start their own daemons on
# loopback with their own configs, so the system services are not needed
# (RUNLEVEL=1 keeps sysvinit-style installs from starting them).
SYSTEM_PACKAGES := openssh-server tmux procps iproute2 slurmctld slurmd slurm-client munge slurmdbd mariadb-server
SYSTEM_COMMANDS := /usr/sbin/sshd tmux pgrep ip slurmctld slurmd sbatch munged slurmdbd mariadbd

# With CI=true a test bed that cannot be installed fails `make test` with the reason (a green
# run must not hide skipped sshd or Slurm tests); developers outside CI get a warning.
define find_missing
missing=""; for c in $(SYSTEM_COMMANDS); do \
	command -v $$c >/dev/null 2>&1 || [ -x "$$c" ] || [ -x "/usr/sbin/$$c" ] || missing="$$missing $$c"; \
done
endef

system-deps:
	@$(find_missing); \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			echo "installing test bed packages (missing:$$missing)"; \
			$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			$$SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null \
			|| reason="apt-get install $(SYSTEM_PACKAGES) failed (see above)"; \
		else \
			reason="no apt-get on this machine: install the packages that provide them by hand"; \
		fi; \
		$(find_missing); \
		if [ -n "$$missing" ]; then \
			if [ "$${CI:-}" = true ]; then \
				echo "error: the test bed is incomplete (missing:$$missing): $${reason:-installed, but the commands are still not found}" >&2; \
				echo "CI=true: the tests that need them would be skipped and hide it, so make test stops here" >&2; \
				exit 1; \
			fi; \
			echo "warning: missing$$missing ($${reason:-not found after install}); the tests that need them will be skipped" >&2; \
		fi; \
	fi

## make stress-test: the UI and monitor tests 20 times with a busy loop on every core.
stress-test: $(STAMP_DEV) system-deps
	$(BIN)/python bench/flaky.py --rounds $(or $(ROUNDS),20)

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

## make types: mypy over src/ as [tool.mypy] in pyproject.toml sets it (docs/development.md).
types: $(STAMP_DEV)
	$(BIN)/mypy

format: $(STAMP_DEV)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache .mypy_cache

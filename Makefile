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
	$(PIP) install --quiet -e '.[eval,dev]'
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

# sshd (and other test servers) for the test bed; installed only where missing.
system-deps:
	@if [ ! -x /usr/sbin/sshd ] || ! command -v tmux >/dev/null; then \
		if command -v apt-get >/dev/null; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			echo "installing openssh-server and tmux for the test bed"; \
			$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
			$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server tmux >/dev/null; \
		else \
			echo "warning: no apt-get; sshd-based tests will be skipped" >&2; \
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

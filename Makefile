# Countersign: `make run` starts the whole stack, `make test` runs every test. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
ARGS ?=

.PHONY: run test bench lint install clean

$(VENV)/.app-installed: requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

$(VENV)/.dev-installed: $(VENV)/.app-installed requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $@

install: $(VENV)/.dev-installed

run: $(VENV)/.app-installed
	$(PY) -m project.devstack run

test: $(VENV)/.dev-installed
	$(PY) -m project.devstack test -- $(ARGS)

bench: $(VENV)/.dev-installed
	$(PY) -m project.devstack bench -- $(ARGS)

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache

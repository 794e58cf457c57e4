# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export HF_DATASETS_DISABLE_PROGRESS_BARS := 1

.PHONY: setup demo test bench lint clean-demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed ## create .venv and install the project

demo: setup ## generate the demo corpus, run the pipeline, show the release
	curate demo-data data/raw
	dvc repro
	curate release verify
	curate release show

test: setup ## run the whole test suite
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: setup ## measure against the anchors; writes benchmarks/results.json and results.md
	$(BIN)/python -m benchmarks.run

lint: setup
	$(BIN)/ruff check curation tests
	$(BIN)/mypy curation

clean-demo:
	rm -rf data/raw/* data/interim data/releases reports dvc.lock

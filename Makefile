# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
LS_VENV := .venv-labelstudio
LABEL_STUDIO_VERSION := 1.23.2
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export HF_DATASETS_DISABLE_PROGRESS_BARS := 1

.PHONY: setup review-tools chromium postgresql tesseract demo test test-fast bench lint clean-demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed ## create .venv and install the project

# Label Studio (the review server) has its own venv: its pins clash with the project's.
$(LS_VENV)/.installed: | $(BIN)/python
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install --quiet --upgrade pip
	$(LS_VENV)/bin/pip install --quiet label-studio==$(LABEL_STUDIO_VERSION)
	touch $@

# Headless Chromium (Debian package) for the labeling-UI browser test.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# PostgreSQL (Debian package) for a team's Label Studio; the tests start their own cluster with initdb/pg_ctl.
postgresql:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }

# Tesseract (Debian package) reads burned-in text in figures: the deidentify stage masks what identifies.
tesseract:
	@command -v tesseract >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tesseract-ocr >/dev/null; }

review-tools: $(LS_VENV)/.installed chromium postgresql ## install the Label Studio server, Chromium and PostgreSQL

demo: setup tesseract ## generate the demo corpus, run the pipeline, show the release
	curate demo-data data/raw
	dvc repro
	curate release verify
	curate release show

test: setup tesseract review-tools ## all three layers, unit + integration + e2e (starts Label Studio, a local LLM endpoint, ...)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

test-fast: setup ## the unit layer: in one process, no subprocess, socket, git or registration (about 35 s on 2 idle cores)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m unit -n auto

bench: setup ## measure against the anchors; writes benchmarks/results.json and results.md
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks.run

lint: setup
	$(BIN)/ruff check curation tests
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy curation

clean-demo:
	rm -rf data/raw/* data/interim data/releases reports dvc.lock

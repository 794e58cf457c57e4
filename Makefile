# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
LS_VENV := .venv-labelstudio
LABEL_STUDIO_VERSION := 1.23.2
# evaluation harnesses the release exports are checked in, each in its own venv (their pins clash with the project's)
INSPECT_VENV := .venv-inspect
INSPECT_VERSION := 0.3.285
LMMS_VENV := .venv-lmms-eval
LMMS_EVAL_VERSION := 0.7.3
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export HF_DATASETS_DISABLE_PROGRESS_BARS := 1

.PHONY: setup review-tools harness-tools check-lmms-eval chromium postgresql tesseract demo test test-fast bench docs lint clean-demo

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

# Inspect (inspect_ai), in which the tests run the release's Inspect export against the local OpenAI-compatible
# server (about 360 MB, 30 s); `make test` installs it.
$(INSPECT_VENV)/.installed: | $(BIN)/python
	$(PYTHON) -m venv $(INSPECT_VENV)
	$(INSPECT_VENV)/bin/pip install --quiet --upgrade pip
	$(INSPECT_VENV)/bin/pip install --quiet inspect-ai==$(INSPECT_VERSION) openai
	touch $@

harness-tools: $(INSPECT_VENV)/.installed ## install the Inspect harness the export parity test runs

# lmms-eval pulls torch and more (GBs): not part of `make test`. This target installs it (the CPU torch the project
# pins) and checks the demo release's lmms-eval export with lmms-eval's own task loader and the export's utils.
$(LMMS_VENV)/.installed: | $(BIN)/python
	$(PYTHON) -m venv $(LMMS_VENV)
	$(LMMS_VENV)/bin/pip install --quiet --upgrade pip
	$(LMMS_VENV)/bin/pip install --quiet torch==2.13.0 lmms-eval==$(LMMS_EVAL_VERSION)
	# the torchvision it resolves is built for another torch and fails to import (torchvision::nms); task loading
	# does not need it
	$(LMMS_VENV)/bin/pip uninstall --quiet -y torchvision
	touch $@

check-lmms-eval: setup $(LMMS_VENV)/.installed ## export a release for lmms-eval and load it with lmms-eval (RELEASE=dir)
	rm -rf reports/export/lmms-eval
	curate release export $${RELEASE:-data/releases/neuro-bench-0.1.0} reports/export/lmms-eval --format lmms-eval
	$(LMMS_VENV)/bin/python scripts/check_lmms_eval_export.py reports/export/lmms-eval

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

# one pytest run over the cores: the e2e layer as two groups, each in one worker, so the demo pipeline and the servers
# its tests share are built once (tests/testlayers.py); unit and integration tests, which share nothing (their ANTs fits
# run on one thread each), go to whichever worker is free.
test: setup tesseract review-tools harness-tools ## all three layers, unit + integration + e2e (starts Label Studio, a local LLM endpoint, ...)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 --dist loadgroup --durations=25

test-fast: setup ## the unit layer: in one process, no subprocess, socket, git or registration (about 35 s on 2 idle cores)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m unit -n auto

bench: setup ## measure against the anchors; writes benchmarks/results.json and results.md
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks.run

docs: setup ## build the documentation site (docs/, mkdocs.yml) into site/; --strict: a broken link fails
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

lint: setup
	$(BIN)/ruff check curation tests
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy curation

clean-demo:
	rm -rf data/raw/* data/interim data/releases reports dvc.lock

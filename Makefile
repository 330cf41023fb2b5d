# Two commands do all the set-up on a fresh Linux machine:
#   make tune   measure this machine and install its table (the main job)
#   make test   lint and run the test suite
# Both create .venv on first use. PyTorch is pinned to a CPU build: on these
# machines pip takes it from local disk; elsewhere pass the CPU wheel index, e.g.
#   make test TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu
# make docs builds the documentation site (docs/, mkdocs.yml) strictly into site/.

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
WORLD_SIZE ?= 2
TUNE_OUT ?= tune-out
# pytest-xdist workers: one per CPU, at most 4 (the suite is mostly single-threaded evaluation; its multi-rank
# tests wait with deadlines, not wall-clock bounds, so two at once only take longer; a worker holds engine
# readings of 1-2 GB, and a container may show more CPUs than its quota lets it use)
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
BIN := $(VENV)/bin

.PHONY: tune test docs lint format clean

# setup.py and the C source: a changed compiled round is rebuilt by the editable install
$(BIN)/.installed: pyproject.toml setup.py $(wildcard src/artune/algorithms/shm/*.[ch])
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_INDEX) "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

tune: $(BIN)/.installed
	$(BIN)/artune tune --world-size $(WORLD_SIZE) --out $(TUNE_OUT)

test: $(BIN)/.installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

$(BIN)/.docs: $(BIN)/.installed pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[test,docs]"
	touch $@

# the site into site/, then its checks: every page built, one rendered in headless Chromium where installed
docs: $(BIN)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q -rs tests/test_docs.py

format: $(BIN)/.installed
	$(BIN)/ruff check --fix src tests bench
	$(BIN)/ruff format src tests bench

clean:
	rm -rf $(VENV) $(TUNE_OUT) site .pytest_cache .ruff_cache .hypothesis

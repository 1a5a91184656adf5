# The two commands of the README: `make run` (set up, run the stages sweep) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test smoke lint clean bench

$(BIN)/raysweep: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: on our machines this picks the local CPU build; unpinned
	# torch would pull several GB of CUDA packages.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run: $(BIN)/raysweep
	$(BIN)/python -m raysweep run search_spaces/stages.yaml

smoke: $(BIN)/raysweep
	$(BIN)/python -m raysweep run search_spaces/smoke.yaml --name smoke-$$(date +%s)

# Debian's Chromium: the report tests open the HTML in it, and `report --png` (kaleido) drives it.
/usr/bin/chromium:
	apt-get update -qq && apt-get install -y -qq chromium

# W&B's own sweep engine (PyPI sweeps), the oracle of tests/test_wandb_oracle.py. Its own venv:
# it pins numpy<2, which torch and Ray here do not.
ORACLE := .venv-wandb
$(ORACLE)/bin/python:
	$(PY) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install -q sweeps==0.3.0

test: $(BIN)/raysweep /usr/bin/chromium $(ORACLE)/bin/python
	$(BIN)/python -m pytest -q

lint: $(BIN)/raysweep
	$(BIN)/ruff check raysweep train_loops tests bench

# The benchmarks (docs/benchmarks.md); each part takes the Ray lock in turn. BENCH_ARGS=--quick for tiny sizes.
bench: $(BIN)/raysweep
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(ORACLE) raysweep_runs

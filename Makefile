# The two commands of the README: `make run` (set up, run the stages sweep) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-slow smoke lint clean bench bench-check test-ray-versions wheelhouse gpu-check offline-install

$(BIN)/raysweep: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: where a CPU build of it is at hand, pip takes that one; unpinned
	# torch would pull several GB of CUDA packages.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# Run again after a Ctrl-C, it continues the sweep (--resume-existing) instead of refusing its name.
RUN_SPEC ?= search_spaces/stages.yaml
run: $(BIN)/raysweep
	$(BIN)/python -m raysweep run $(RUN_SPEC) --resume-existing $(RUN_FLAGS)

smoke: $(BIN)/raysweep
	$(BIN)/python -m raysweep run search_spaces/smoke.yaml --name smoke-$$(date +%s)

# Debian's Chromium: the report tests open the HTML in it, and `report --png` (kaleido) drives it.
/usr/bin/chromium:
	apt-get update -qq && apt-get install -y -qq chromium

# W&B's own sweep engine (PyPI sweeps), the oracle of tests/search/test_wandb_oracle.py. Its own venv:
# it pins numpy<2, which torch and Ray here do not.
ORACLE := .venv-wandb
$(ORACLE)/bin/python:
	$(PY) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install -q sweeps==0.3.0

# Two test files at a time (pytest-xdist, a file's tests on one worker, so a module's Ray cluster is
# started once): about 10% sooner than one at a time. Three at a time: 6% sooner than two over the
# whole suite on 2 cores, and each of two full runs failed a different test under that load
# (docs/benchmarks.md), so two.
test: $(BIN)/raysweep /usr/bin/chromium $(ORACLE)/bin/python
	$(MAKE) lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# What `make test` leaves out to stay near 35 minutes on 2 cores: the chaos runs, and the twins of
# tests whose rule `make test` checks once (TorchTrainer twins, a second method or moment). Each
# slow test names, beside its mark, the test of `make test` that covers its layer.
test-slow: $(BIN)/raysweep /usr/bin/chromium $(ORACLE)/bin/python
	$(BIN)/pip install -q -e '.[dev,frameworks]'  # Lightning and HF Trainer scripts' own checkpoints resumed
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m slow

# The Ray versions docs/clusters.md says raysweep is tested on: a venv per version (.venv-ray<V>, torch
# pinned first, then that Ray and raysweep's other dependencies), and a quick subset of the
# suite on each: the private names (private_api), pure decisions, what each rank's process sees of
# its fake GPU, real sweeps through restore, W&B, Optuna, warm workers and TorchTrainer, a trial
# spanning two nodes under both runners (per-worker label selectors, the workers' runtime env), and the
# faults under both runners (a killed worker, a stuck rank, a killed or interrupted driver then
# resume). Every version runs, whatever the one before it did; a table (version, passed, failed,
# minutes) ends it, and the target fails if any version failed. RAY_VERSIONS="2.58.0" for one.
RAY_VERSIONS ?= 2.54.0 2.56.0 2.58.0 2.60.0
RAY_SUBSET := tests/test_private_api.py tests/search/test_decisions.py tests/runs/test_runs_without_ray.py tests/search/test_search.py \
	tests/trial/test_gpu_placement.py \
	tests/driver/test_driver.py::test_grid_runs_its_grid_and_logs_every_trial_to_wandb \
	tests/driver/test_driver.py::test_searched_num_gpus_sizes_each_trial_and_averages_over_ranks \
	tests/driver/test_driver.py::test_bayes_uses_optuna_and_keeps_its_journal \
	tests/driver/test_driver.py::test_asha_stops_poor_trials_at_rungs \
	tests/driver/test_driver.py::test_driver_killed_mid_sweep_then_resume_completes_the_budget \
	tests/trial/test_reliability.py::test_a_killed_train_worker_restarts_from_its_checkpoint \
	tests/trial/test_reliability.py::test_watchdog_ends_a_rank_stuck_in_a_collective \
	tests/driver/test_interrupt.py \
	"tests/trial/test_warm_workers.py::test_a_scheduler_stops_two_worker_trials_and_the_next_trial_gets_their_slots[torchtrainer]" \
	"tests/trial/test_warm_workers.py::test_a_warm_worker_that_does_not_answer_fails_its_trial_within_the_bound" \
	"tests/trial/test_warm_workers.py::test_a_trial_whose_cpus_another_job_holds_is_queued_on_warm_workers_and_fails_in_the_bound_on_torchtrainer" \
	"tests/trial/test_multinode.py::test_a_four_worker_trial_spans_two_nodes_of_two"
test-ray-versions: /usr/bin/chromium $(ORACLE)/bin/python
	rm -rf .ray-versions && mkdir -p .ray-versions
	for v in $(RAY_VERSIONS); do \
	  venv=.venv-ray$$v; start=$$(date +%s); \
	  echo "== Ray $$v"; \
	  { test -x $$venv/bin/python || $(PY) -m venv $$venv; } && \
	  $$venv/bin/pip install -q torch==2.13.0 && \
	  $$venv/bin/pip install -q "ray[tune,train,default]==$$v" '.[dev]' && \
	  $$venv/bin/python -m pytest -q -p no:cacheprovider -m 'not bench' --junitxml=.ray-versions/$$v.xml $(RAY_SUBSET); \
	  echo $$(( $$(date +%s) - start )) > .ray-versions/$$v.seconds; \
	done; \
	$(PY) tools/ray_versions.py .ray-versions $(RAY_VERSIONS)

LINTED := raysweep train_loops tests bench tools
lint: $(BIN)/raysweep
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# The benchmarks (docs/benchmarks.md); each part takes the Ray lock in turn. BENCH_ARGS=--quick for tiny sizes.
bench: bench-check
	$(BIN)/python -m bench $(BENCH_ARGS)

# The benchmark's own checks (each part's quick mode writes its results file), before its hours of figures.
bench-check: $(BIN)/raysweep $(ORACLE)/bin/python
	$(BIN)/python -m pytest -q -m bench tests/tools/test_bench.py

# Every wheel raysweep needs but torch, for a node without internet (docs/clusters.md, "A GPU node
# without internet"): the versions this venv runs, for PYTHON_VERSION on the PLATFORM tags, and
# raysweep's own wheel. On the node: pip install --no-index --find-links wheelhouse 'raysweep[dev]'.
# PART_MIB=N: also in parts of at most N MiB, one copy each, under $(WHEELHOUSE)-parts/a, b, ...
# (tools/wheelhouse_parts.py), leaving out the large wheels of what HAS=FILE lists (`pip freeze` on
# the node) and torch: the node's own build is the one to use.
PYTHON_VERSION ?= $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PLATFORM ?= manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
WHEELHOUSE ?= wheelhouse
wheelhouse: $(BIN)/raysweep
	rm -rf $(WHEELHOUSE).partial && mkdir -p $(WHEELHOUSE).partial
	$(BIN)/pip freeze --exclude-editable | grep -viE '^(torch|triton|nvidia-|raysweep)' > $(WHEELHOUSE).partial/requirements.txt
	$(BIN)/pip download -q --no-deps --python-version $(PYTHON_VERSION) $(addprefix --platform ,$(PLATFORM)) \
	  -d $(WHEELHOUSE).partial -r $(WHEELHOUSE).partial/requirements.txt
	# A package with no wheel on PyPI came as its source: built into a wheel here (pure Python
	# ones only; the node could not build it without an index).
	set -e; for sdist in $$(ls $(WHEELHOUSE).partial/*.tar.gz $(WHEELHOUSE).partial/*.zip 2>/dev/null); do \
	  $(BIN)/pip wheel -q --no-deps -w $(WHEELHOUSE).partial "$$sdist" && rm "$$sdist"; done
	$(BIN)/pip wheel -q --no-deps -w $(WHEELHOUSE).partial .
	rm -rf $(WHEELHOUSE) && mv $(WHEELHOUSE).partial $(WHEELHOUSE)
	if [ -n "$(PART_MIB)" ]; then $(BIN)/python tools/wheelhouse_parts.py $(WHEELHOUSE) --part-mib $(PART_MIB) \
	  $(if $(HAS),--has $(HAS)); fi

# On the node without internet, with the wheelhouse's parts copied beside the repository: a venv over
# the node's own torch (OFFLINE_VENV). Where the node's python3 is itself a venv, --system-site-packages
# alone would not see its torch: a .pth adds that venv's packages behind the wheels installed here.
# --no-deps: the parts are the whole set, and pip would refuse the node's own versions where they miss a pin.
OFFLINE_VENV ?= .offline-venv
offline-install:
	python3 -m venv --system-site-packages $(OFFLINE_VENV)
	python3 -c 'import site; print(site.getsitepackages()[0])' > $$(ls -d $(OFFLINE_VENV)/lib/python3*/site-packages)/node_site.pth
	$(OFFLINE_VENV)/bin/pip install -q --no-index --no-deps --no-compile $(WHEELHOUSE)-parts/*/*.whl
	$(OFFLINE_VENV)/bin/pip check

# On a GPU node, with raysweep installed beside the node's torch (GPU_PY: that Python): the GPU
# tests and bench --gpu, one results file (GPU_CHECK_OUT) with the device, the tests' outcome and
# every figure.
GPU_PY ?= $(BIN)/python
GPU_CHECK_OUT ?= gpu-check.json
gpu-check:
	$(GPU_PY) -m bench.gpu_check --out $(GPU_CHECK_OUT)

clean:
	rm -rf $(VENV) $(ORACLE) raysweep_runs

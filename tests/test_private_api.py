"""Every private Ray, Optuna and wandb name raysweep uses (``raysweep/private_api.py``), checked against
the installed versions: a Ray, Optuna or wandb that renames or reshapes one fails here, by name."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import optuna
import pytest
import ray
from ray import tune
from ray.tune.schedulers import FIFOScheduler
from ray.tune.search.optuna import OptunaSearch

from raysweep import private_api

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("ray", "optuna", "wandb")


def test_a_tuners_run_and_tune_config_are_the_ones_it_runs_with(tmp_path: Path):
    callback, scheduler = tune.Callback(), FIFOScheduler()
    tuner = tune.Tuner(
        lambda config: None,
        tune_config=tune.TuneConfig(scheduler=scheduler),
        run_config=tune.RunConfig(name="t", storage_path=str(tmp_path), callbacks=[callback]),
    )
    run_config, tune_config = private_api.restored_config(tuner)
    assert isinstance(run_config, tune.RunConfig) and run_config.callbacks == [callback]
    assert isinstance(tune_config, tune.TuneConfig) and tune_config.scheduler is scheduler
    assert hasattr(run_config, "stop")


def test_tune_lets_a_scheduler_set_a_trials_status():
    """A scheduler gets the TuneController through a wrapper that lets only some names through."""
    import inspect

    from ray.tune.execution.tune_controller import TuneController

    assert '"_set_trial_status"' in inspect.getsource(TuneController._wrapped)
    assert list(inspect.signature(TuneController._set_trial_status).parameters) == ["self", "trial", "status"]


def test_tune_lets_a_scheduler_save_the_experiment_state_now():
    """``save_experiment_state``: the wrapper keeps the controller, whose ``checkpoint(force=True)``
    saves the experiment state whatever its period."""
    import inspect

    from ray.tune.execution.tune_controller import TrialRunnerWrapper, TuneController

    assert "self._tune_controller = " in inspect.getsource(TrialRunnerWrapper.__init__)
    assert list(inspect.signature(TuneController.checkpoint).parameters)[:2] == ["self", "force"]


def test_tune_keeps_as_many_idle_actors_of_a_shape_as_it_is_told_and_ends_them_all_at_the_end():
    """``keep_idle_actors`` reaches Tune's actor cache through the wrapper a scheduler gets; the
    cache keeps that many idle actors of the shape past its cleanup, and drops them all at the end."""
    import inspect
    from types import SimpleNamespace

    from ray.tune.execution.tune_controller import TrialRunnerWrapper, TuneController
    from ray.tune.utils.object_cache import _ObjectCache

    assert "self._actor_cache = _ObjectCache(" in inspect.getsource(TuneController.__init__)
    assert "self._tune_controller = tune_controller" in inspect.getsource(TrialRunnerWrapper.__init__)
    cache = _ObjectCache(may_keep_one=True)
    wrapper = SimpleNamespace(_tune_controller=SimpleNamespace(_actor_cache=cache))
    token = tune.PlacementGroupFactory([{"memory": 1, "node:127.0.0.2": 0.001}])
    private_api.keep_idle_actors(wrapper, token, 2)
    assert all(cache.cache_object(token, actor) for actor in ("a", "b"))
    assert not list(cache.flush_cached_objects()) and cache.num_cached_objects == 2
    private_api.keep_idle_actors(wrapper, token, -1)
    assert list(cache.flush_cached_objects()) == ["a"]
    assert list(cache.flush_cached_objects(force_all=True)) == ["b"]  # what Tune does as a sweep ends


def test_optuna_search_keeps_its_open_trials_by_tune_trial_id_and_its_study():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = OptunaSearch(
        space=lambda trial: {"x": trial.suggest_float("x", 0, 1)},
        metric="loss",
        mode="min",
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    config = search.suggest("tune-trial-1")
    open_trials, study = private_api.optuna_trials(search), private_api.optuna_study(search)
    assert isinstance(study, optuna.Study)
    assert list(open_trials) == ["tune-trial-1"]
    assert isinstance(open_trials["tune-trial-1"], optuna.Trial) and open_trials["tune-trial-1"].params == config
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.RUNNING]


def test_local_gpu_count_is_rays_own_count_of_this_machine():
    """The driver sizes an embedded Ray from it; Ray's detection, run in ``ray.init``, must agree."""
    ray.init(address="local", num_cpus=1, include_dashboard=False)
    try:
        assert private_api.local_gpu_count() == ray.cluster_resources().get("GPU", 0)
    finally:
        ray.shutdown()


def test_local_gpu_count_honours_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert private_api.local_gpu_count() == 0


def _dotted(node: ast.AST) -> str | None:
    """``ray.worker.get_dashboard_url`` for that attribute chain; None if it is not rooted at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_uses(source: str) -> list[str]:
    """Private names of Ray or Optuna a module's source uses: imported (``from ray._private import x``,
    ``import ray._private.utils``, ``from ray import _x``) or read off the module (``ray._private.x``,
    ``ray.worker.x``, which Ray itself calls private)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
            if any(part.startswith("_") for part in (node.module or "").split(".")) or node.module == "ray.worker":
                found.append(f"from {node.module}")
        elif isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in LIBRARIES and any(p.startswith("_") for p in a.name.split("."))
            ]
        elif isinstance(node, ast.Attribute):
            chain = _dotted(node)
            if chain and chain.split(".")[0] in LIBRARIES:
                if any(part.startswith("_") for part in chain.split(".")[1:]) or chain.startswith("ray.worker."):
                    found.append(chain)
    return found


def test_the_private_name_check_finds_each_kind_of_use():
    """The check below can fail: each way of reaching a private name is caught."""
    for source in (
        "from ray._private import utils",
        "import ray._private.utils",
        "from ray import _x",
        "import ray\nray.worker.get_dashboard_url()",
        "import ray\nray._private.services.x()",
        "from ray.worker import get_dashboard_url",
    ):
        assert private_uses(source), source
    assert private_uses("import ray\nray.get_runtime_context().get_node_id()") == []


def test_no_other_module_uses_a_private_ray_optuna_or_wandb_name():
    """Only private_api.py may hold them."""
    offenders = [
        f"{path.name}: {use}"
        for path in sorted((ROOT / "raysweep").rglob("*.py"))
        if path.name != "private_api.py"
        for use in private_uses(path.read_text())
    ]
    assert offenders == []


def test_no_other_module_reaches_into_wandbs_sdk():
    """wandb's internals (``wandb.sdk.*``) are named in private_api.py alone; the program hook loads
    its run classes from there."""
    offenders = [
        path.name
        for path in sorted((ROOT / "raysweep").rglob("*.py"))
        if path.name != "private_api.py" and "wandb.sdk" in path.read_text()
    ]
    assert offenders == []


def test_wandbs_run_classes_and_agent_functions_are_where_raysweep_reaches_them(tmp_path: Path):
    import importlib

    import yaml

    for module, name in private_api.WANDB_RUN_CLASSES.items():
        assert callable(getattr(importlib.import_module(module), name).__dict__["log"])
    args = private_api.sweep_command_args({"lr": 0.001, "flag": True})
    assert args["args"] == ["--lr=0.001", "--flag=True"] and args["args_no_boolean_flags"] == ["--lr=0.001", "--flag"]
    assert private_api.sweep_command(["${env}", "${program}", "${args}"]) == ["${env}", "${program}", "${args}"]
    private_api.save_config_file(str(tmp_path / "c.yaml"), {"lr": {"value": 0.1}})
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["lr"] == {"value": 0.1}


def test_wandbs_sweep_functions_take_what_its_cli_passes():
    """``wandb sweep --stop`` and ``--update -R`` call these; raysweep calls them the same way."""
    import inspect

    from wandb.apis.public.sweeps import _set_sweep_state, _sweep_with_runs, _upsert_sweep

    assert list(inspect.signature(_set_sweep_state).parameters) == ["api", "sweep", "state", "entity", "project"]
    assert {"obj_id", "entity", "project", "prior_runs"} <= set(inspect.signature(_upsert_sweep).parameters)
    assert list(inspect.signature(_sweep_with_runs).parameters)[:3] == ["api", "sweep", "specs"]


def test_wandbs_sweep_scheduler_builds_and_asks_as_raysweep_calls_it(tmp_path: Path):
    """wandb 0.31's scheduler (experimental): the names raysweep calls, with the signatures it calls."""
    import inspect

    w = private_api.wandb_scheduler()
    assert list(inspect.signature(w.optuna.make_optimizer).parameters) == ["sweep", "options"]
    assert {"study", "distributions", "search_space", "terminator"} <= set(
        inspect.signature(w.optuna.OptunaOptions).parameters
    )
    assert list(inspect.signature(w.optuna.build_optuna_optimizer).parameters) == ["sweep"]
    assert list(inspect.signature(w.ax.build_ax_optimizer).parameters) == ["sweep"]
    assert list(inspect.signature(w.ax.AxOptimizer).parameters)[:3] == ["client", "sweep", "terminator"]
    config = {
        "metric": {"name": "loss"},
        "parameters": {"x": {"min": 0.0, "max": 1.0}},
        "scheduler": {"engine": "optuna"},
    }
    info = w.SweepInfo(id="s", name="s", entity="e", project="p", config=config, controller_run_name="")
    study = optuna.create_study(directions=w.optuna.sweep_directions(config))
    distributions = w.optuna.search_space_from_sweep_config(config["parameters"])
    optimizer = w.optuna.make_optimizer(info, w.optuna.OptunaOptions(study=study, distributions=distributions))
    (asked,) = optimizer.ask_n_runs(1)
    run = w.RunWithMetrics(asked.config, w.RunState("finished"), "", {"loss": 0.5}, [{"_step": 1, "loss": 0.5}])
    optimizer.tell_run(asked.run_id, run)
    assert study.trials[0].value == 0.5 and not optimizer.has_terminator()
    optimizer.tell_existing_finished_run(run)
    assert optimizer.tell_existing_active_run(w.Run(asked.config, w.RunState("running"), "")) is not None


def test_a_trials_checkpoints_are_where_restart_from_sets_them():
    import inspect

    from ray.train._internal.checkpoint_manager import _CheckpointManager
    from ray.train._internal.session import _TrainingResult
    from ray.tune.experiment.trial import Trial

    assert list(inspect.signature(_TrainingResult).parameters) == ["checkpoint", "metrics"]
    manager = _CheckpointManager(None)
    assert manager._latest_checkpoint_result is None and manager._checkpoint_results == []
    assert "self.run_metadata.checkpoint_manager.latest_checkpoint_result" in inspect.getsource(Trial)


def test_the_gcs_record_of_a_placement_group_says_its_job_and_creator():
    """``actor_groups`` reads each group's job, creator actor and whether it died from the GCS."""

    ray.init(address="local", num_cpus=1, include_dashboard=False)
    try:
        _groups_of_a_job_and_its_actor()
    finally:
        ray.shutdown()


def _groups_of_a_job_and_its_actor() -> None:
    from ray.util.placement_group import placement_group, remove_placement_group

    @ray.remote(num_cpus=0)
    class Maker:
        def make(self):
            return placement_group([{"CPU": 0.01}])

    maker = Maker.remote()
    group = ray.get(maker.make.remote())
    job = ray.get_runtime_context().get_job_id()
    assert [(g.id, dead) for g, dead in private_api.actor_groups(job)] == [(group.id, False)]
    driver_made = placement_group([{"CPU": 0.01}])  # not an actor's: never listed
    ray.kill(maker)
    for _ in range(50):
        if private_api.actor_groups(job) == [] or private_api.actor_groups(job)[0][1]:
            break
        time.sleep(0.1)
    assert [(g.id, dead) for g, dead in private_api.actor_groups(job)] == [(group.id, True)]
    assert private_api.actor_groups("ffffffff") == []
    remove_placement_group(group)
    remove_placement_group(driver_made)
    assert private_api.actor_groups(job) == []


@pytest.mark.parametrize(
    "name",
    [
        "restored_config",
        "set_trial_status",
        "keep_idle_actors",
        "optuna_trials",
        "optuna_study",
        "local_gpu_count",
        "set_sweep_state",
        "add_prior_runs",
        "teed_wandb_log",
        "sweep_command_args",
        "sweep_command",
        "save_config_file",
        "wandb_scheduler",
        "restart_from",
        "actor_groups",
        "trial_filesystem",
        "draining_nodes",
        "drain",
    ],
)
def test_private_api_names_its_uses(name: str):
    """Each private name private_api.py wraps is said in its docstring and used elsewhere in raysweep
    (one that no module uses any more belongs out of the file)."""
    assert f"``{name}``" in private_api.__doc__
    users = [p for p in (ROOT / "raysweep").rglob("*.py") if p.name != "private_api.py" and f"{name}(" in p.read_text()]
    assert users, f"no module uses private_api.{name}"


def test_the_gcs_answers_for_draining_nodes_and_a_tune_trial_names_its_filesystem():
    """``draining_nodes`` answers on a live Ray (a worker node drained through the GCS, listed with its
    deadline and acted on: tests/trial/test_preemption.py), and lists the head ``drain`` drained,
    which the GCS does not; ``trial_filesystem``."""
    import pyarrow.fs
    import ray
    from ray.tune.experiment import Trial

    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="ERROR")
    try:
        assert private_api.draining_nodes() == {}
        head = ray.get_runtime_context().get_node_id()
        private_api.drain([head], 1_900_000_000_000, "the job's time limit")
        assert private_api.draining_nodes() == {head: 1_900_000_000_000}
        from ray import tune

        tune.register_trainable("private_api_f", lambda config: None)
        trial = Trial("private_api_f", config={}, storage=_storage_context())
        assert isinstance(private_api.trial_filesystem(trial), pyarrow.fs.LocalFileSystem)
    finally:
        ray.shutdown()


def _storage_context():
    import tempfile

    from ray.train._internal.storage import StorageContext

    return StorageContext(storage_path=tempfile.mkdtemp(), experiment_dir_name="e")

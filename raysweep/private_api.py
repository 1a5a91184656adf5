"""Every private Ray, Optuna and wandb name raysweep uses, in this one module.

Each has no public equivalent in the Ray versions raysweep supports; tests/test_private_api.py
checks every one against the installed Ray and Optuna, so an upgrade that renames or reshapes
one fails there by name, not deep inside a sweep.

* Tune: ``Tuner.restore`` keeps the original ``RunConfig``; a resumed driver attaches its own
  callbacks and stoppers, and reads the restored scheduler (``restored_config``).
* Tune's checkpoints: a resumed trial goes on from the newest checkpoint on storage, which Tune's
  saved state may not name (``restart_from``; ``driver/checkpoints.py`` says why); a trial's
  storage may be a URI's, whose filesystem Tune keeps on the trial (``trial_filesystem``).
* Ray's draining nodes: the GCS's list of nodes that announced their end, with each deadline
  (``draining_nodes``; ``trial/preemption.py``), which Ray Train V2 reads the same way; a drain
  asked of the GCS (``drain``, as ``ray drain-node`` asks it), noted in Ray's KV store too.
* Ray's placement groups: a group an actor made (Ray Train's controller makes its workers') is
  removed only once its job has ended too; the GCS's record says whose it is and whether that
  actor died (``actor_groups``), which ``ray.util.placement_group_table`` leaves out.
* Tune's queue: a scheduler that holds a waiting trial back sets it PAUSED, as Tune lets
  schedulers do (its ``TuneController`` hands them ``_set_trial_status``, as Ray's PBT uses it):
  no placement group is staged for it until the scheduler chooses it (``set_trial_status``).
* Tune's actors: Tune keeps an idle trial actor for reuse only while a staged trial of its shape
  waits (its ``_actor_cache``), and the admission stages one trial at a time. Trials that place
  their own slots all have a node's token shape, so their idle actors hold no slot: the admission
  lets Tune keep as many per node as the node hosts workers (``keep_idle_actors``).
* Optuna search: Ray's ``OptunaSearch`` keeps the Optuna trials it has open and its study
  privately; ``search.searchers.DistinctOptunaSearch`` reads both (``optuna_trials``, ``optuna_study``).
* GPUs: the driver counts this machine's GPUs as Ray will (``local_gpu_count``), with Ray's
  accelerator manager rather than ``torch.cuda.device_count()``: importing torch would slow the
  driver's start, for a number Ray's detection already gives.
* Worker output: Ray streams every worker's stdout and stderr to the driver (``log_to_driver``)
  and prints it there itself; the driver shows only its trials' lines, prefixed with the trial's
  id, in place of Ray's printer (``stream_worker_output``).
* W&B sweeps: wandb's public API creates a sweep (``wandb.sweep``) but neither sets its state
  nor adds runs to one that exists; its CLI does both (``wandb sweep --stop``, ``--update -R``)
  through these (``set_sweep_state``, ``add_prior_runs``).
* W&B runs: what a ``program:`` script or a W&B-style function logs reaches its trial through
  wandb's run classes (``WANDB_RUN_CLASSES``, patched in the script's process by
  ``trial/program_hook/sitecustomize.py``, and for a function by ``teed_wandb_log``).
* W&B's sweep scheduler (wandb 0.31, experimental): ``wandb sweep-scheduler`` builds its optimizer
  from ``wandb.sdk.sweeps.scheduler`` (``optuna``, ``ax``, ``optimizer``) and ``SweepInfo``, none of
  which wandb exports from a public module. The engine sweeps run that same code
  (``search/wandb_engine.py``), reached through ``wandb_scheduler``.
* ``wandb agent``'s command and config file: a script's argv and its ``wandb.init`` config are
  made by the functions the agent uses (``sweep_command_args``, ``sweep_command``,
  ``save_config_file``), so values are spelled as under ``wandb agent``.

This module imports nothing at its top: the program hook loads it by path into every script.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable, Iterator
from typing import Any

# --- Tune --------------------------------------------------------------------------------------


def restored_config(tuner: Any) -> tuple[Any, Any]:
    """A restored ``Tuner``'s ``RunConfig`` (to set this driver's callbacks and stop on) and ``TuneConfig``."""
    local = tuner._local_tuner  # noqa: SLF001
    return local._run_config, local._tune_config  # noqa: SLF001


DRAIN_NOTE = b"raysweep_draining"  # Ray's KV store: the nodes raysweep drained, {node id: deadline ms}


def draining_nodes() -> dict[str, int]:
    """Ray's draining nodes, ``{node id (hex): deadline in epoch ms}`` (0: no deadline), as the GCS
    holds them (``ray drain-node``; autoscaler v2 and KubeRay drain so), with those ``drain`` noted.
    Ray Train V2 reads the GCS's the same way (its ``preemption.py``); Ray has no public call for it."""
    import ray._private.state
    from ray.experimental import internal_kv

    found = dict(ray._private.state.state.get_draining_nodes())
    noted = internal_kv._internal_kv_get(DRAIN_NOTE) if internal_kv._internal_kv_initialized() else None
    return json.loads(noted or "{}") | found


def drain(node_ids: list[str], deadline_ms: int, message: str) -> None:
    """Drain these nodes as a preemption, as ``ray drain-node`` does, with a deadline (epoch ms).
    The GCS accepts the head node's drain but never lists it as draining (Ray 2.60), so every
    node drained here is also noted in Ray's KV store, where ``draining_nodes`` reads it too."""
    import ray
    from ray.core.generated import autoscaler_pb2
    from ray.experimental import internal_kv

    gcs = ray._raylet.GcsClient(address=ray.get_runtime_context().gcs_address)
    reason = autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION")
    for node_id in node_ids:
        gcs.drain_node(node_id, reason, message, deadline_ms)
    noted = json.loads(internal_kv._internal_kv_get(DRAIN_NOTE) or "{}")
    internal_kv._internal_kv_put(DRAIN_NOTE, json.dumps(noted | dict.fromkeys(node_ids, deadline_ms)), overwrite=True)


def trial_filesystem(trial: Any) -> Any:
    """The pyarrow filesystem a Tune trial's ``path`` is on (the storage's: local, or a URI's)."""
    return trial.storage.storage_filesystem


def restart_from(trial: Any, checkpoint_path: str | None, report: dict[str, Any]) -> None:
    """A restored trial goes on from ``checkpoint_path`` (``report``: the one that saved it, whose
    ``training_iteration`` Tune counts on from), or starts over (None): its checkpoint manager's
    latest checkpoint, and the kept ones that are gone dropped."""
    import pyarrow.fs
    from ray import tune
    from ray.train._internal.session import _TrainingResult

    fs = trial_filesystem(trial)
    manager = trial.run_metadata.checkpoint_manager
    kept = [
        r
        for r in manager._checkpoint_results  # noqa: SLF001
        if fs.get_file_info(r.checkpoint.path).type == pyarrow.fs.FileType.Directory
    ]
    latest = (
        None if checkpoint_path is None else _TrainingResult(tune.Checkpoint(checkpoint_path, filesystem=fs), report)
    )
    if latest is not None and all(r.checkpoint.path != checkpoint_path for r in kept):
        kept.append(latest)
    manager._checkpoint_results = kept  # noqa: SLF001
    manager._latest_checkpoint_result = latest  # noqa: SLF001


# --- Ray's placement groups --------------------------------------------------------------------


def actor_groups(job_id: str) -> list[tuple[Any, bool]]:
    """The placement groups the actors of the job ``job_id`` (hex) made, not yet removed, each with
    whether its creator actor has died. Ray removes such a group only once both its job and its
    creator actor are dead, so one a dead actor made (Ray Train's controller, a trial's process)
    holds its resources for as long as the sweep's driver runs; and one still pending then is not
    removed even after (Ray 2.60, #62753): it is granted later, and kept."""
    import ray
    from ray._private.state import state
    from ray.core.generated import gcs_pb2
    from ray.util.placement_group import PlacementGroup

    found = []
    for raw in state._connect_and_get_accessor().get_placement_group_table():  # noqa: SLF001
        data = gcs_pb2.PlacementGroupTableData.FromString(raw)
        if data.state == gcs_pb2.PlacementGroupTableData.REMOVED or data.is_detached:
            continue
        made_by_actor = bool(data.creator_actor_id) and not ray.ActorID(data.creator_actor_id).is_nil()
        if data.creator_job_id.hex() == job_id and made_by_actor:
            found.append((PlacementGroup(ray.PlacementGroupID(data.placement_group_id)), data.creator_actor_dead))
    return found


# --- Tune's queue ------------------------------------------------------------------------------


def set_trial_status(tune_controller: Any, trial: Any, status: str) -> None:
    """Move a trial between Tune's status sets (a waiting trial held back: PAUSED)."""
    tune_controller._set_trial_status(trial, status)  # noqa: SLF001


def save_experiment_state(tune_controller: Any) -> None:
    """Save Tune's experiment state now (``tune_controller``: what Tune hands a scheduler): a trial
    that grows goes on from the checkpoint of its promotion even if the driver is killed before
    Tune's next periodic save (``driver/promotions.py``)."""
    tune_controller._tune_controller.checkpoint(force=True)  # noqa: SLF001


def keep_idle_actors(tune_controller: Any, resources: Any, by: int) -> None:
    """Let Tune keep ``by`` more idle trial actors of ``resources`` (a ``PlacementGroupFactory``)
    for the next trials, or fewer when ``by`` is negative. ``tune_controller``: what Tune hands a
    scheduler (its wrapper of the controller). Tune still ends every idle actor when the sweep ends."""
    cache = tune_controller._tune_controller._actor_cache  # noqa: SLF001
    if by > 0:
        cache.increase_max(resources, by)
    elif by < 0:
        cache.decrease_max(resources, -by)


# --- Optuna search -----------------------------------------------------------------------------


def optuna_trials(search: Any) -> dict[str, Any]:
    """Ray's ``OptunaSearch``: Tune trial id -> the Optuna trial it asked for and has not told yet."""
    return search._ot_trials  # noqa: SLF001


def optuna_study(search: Any) -> Any:
    return search._ot_study  # noqa: SLF001


# --- GPUs --------------------------------------------------------------------------------------


def local_gpu_count() -> int:
    """The GPUs an embedded Ray started here will have: those on the node, capped by
    ``CUDA_VISIBLE_DEVICES`` the way Ray's own resource detection caps them."""
    from ray._private.accelerators import get_accelerator_manager_for_resource

    manager = get_accelerator_manager_for_resource("GPU")
    count = manager.get_current_node_num_accelerators()
    visible = manager.get_current_process_visible_accelerator_ids()
    return count if visible is None else min(count, len(visible))


# --- Worker output -----------------------------------------------------------------------------


TRIAL_OUTPUT_HANDLER = "raysweep_trial_output"


def stream_worker_output(handler: Any) -> None:
    """Hand each batch of worker output Ray streams to this driver (a dict with ``lines``,
    ``is_err``, ``pid``) to ``handler``, in place of Ray's own printer (``ray.init(log_to_driver=True)``).

    Ray's dispatcher keeps every handler added under a name, and outlives ``ray.shutdown``: the
    handler of an earlier sweep in this process is removed first, or the k-th sweep of a script
    or notebook would print each line k times.
    """
    from ray._private.worker import global_worker_stdstream_dispatcher

    global_worker_stdstream_dispatcher.remove_handler("ray_print_logs")
    global_worker_stdstream_dispatcher.remove_handler(TRIAL_OUTPUT_HANDLER)
    global_worker_stdstream_dispatcher.add_handler(TRIAL_OUTPUT_HANDLER, handler)


def stop_worker_output() -> None:
    """The sweep's handler of worker output is gone (its sweep ended)."""
    from ray._private.worker import global_worker_stdstream_dispatcher

    global_worker_stdstream_dispatcher.remove_handler(TRIAL_OUTPUT_HANDLER)


# --- W&B sweeps --------------------------------------------------------------------------------


def set_sweep_state(sweep_id: str, state: str, entity: str, project: str) -> None:
    """``wandb sweep --stop|--pause|--resume``: state one of RUNNING, PAUSED, CANCELED, FINISHED."""
    import wandb
    from wandb.apis.public.sweeps import _set_sweep_state

    _set_sweep_state(wandb.Api(), sweep_id, state, entity=entity, project=project)


def add_prior_runs(sweep_id: str, config: dict[str, Any], entity: str, project: str, run_ids: list[str]) -> None:
    """``wandb sweep --update SWEEP -R RUN ...``: attach runs already on W&B to an existing sweep."""
    import wandb
    from wandb.apis.public.sweeps import _sweep_with_runs, _upsert_sweep

    api = wandb.Api()
    found = _sweep_with_runs(api, sweep_id, "{}", entity=entity, project=project)
    if not found:
        raise LookupError(f"W&B has no sweep {entity}/{project}/{sweep_id}")
    _upsert_sweep(api, config, obj_id=found["id"], entity=entity, project=project, prior_runs=run_ids)


# --- W&B runs and wandb agent's command ---------------------------------------------------------

# module -> the run class whose ``log`` is teed (disabled mode's NoopRun overrides Run.log)
WANDB_RUN_CLASSES = {"wandb.sdk.wandb_run": "Run", "wandb.sdk.lib.noop_run": "NoopRun"}


@contextlib.contextmanager
def teed_wandb_log(on_log: Callable[[Any, Any], None]) -> Iterator[None]:
    """wandb's ``Run.log`` (and ``NoopRun.log``) also hand each logged dict to ``on_log(run, data)``."""
    patched = []
    for module_name, class_name in WANDB_RUN_CLASSES.items():
        run_class = getattr(importlib.import_module(module_name), class_name)
        original = run_class.__dict__["log"]

        def log(self: Any, data: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            result = _original(self, data, *args, **kwargs)
            on_log(self, data)
            return result

        run_class.log = log
        patched.append((run_class, original))
    try:
        yield
    finally:
        for run_class, original in patched:
            run_class.log = original


def sweep_command_args(values: dict[str, Any]) -> dict[str, list[str]]:
    """``${args}``, ``${args_no_hyphens}``, ... for these values, spelled as ``wandb agent`` spells them."""
    from wandb.sdk.launch.sweeps import utils

    return utils.create_sweep_command_args({"args": {k: {"value": v} for k, v in values.items()}})


def sweep_command(command: list[str]) -> list[Any]:
    """The sweep's ``command:`` with ``${envvar:NAME}`` filled in, as ``wandb agent`` fills it."""
    from wandb.sdk.launch.sweeps import utils

    return utils.create_sweep_command(command)


def save_config_file(path: str, config: dict[str, Any]) -> None:
    """The YAML file ``wandb.init`` reads its config from under ``wandb agent`` (``WANDB_CONFIG_PATHS``)."""
    from wandb.sdk.lib import config_util

    config_util.save_config_file_from_dict(path, config)


# --- W&B's sweep scheduler ---------------------------------------------------------------------


class WandbScheduler:
    """The names of wandb's sweep scheduler raysweep calls, as ``wandb sweep-scheduler`` calls them;
    the engine modules are imported when first used (W&B's ax module imports Ax: seconds)."""

    def __init__(self) -> None:
        import wandb
        from wandb.sdk.sweeps import RunState, SweepInfo
        from wandb.sdk.sweeps.scheduler.optimizer import Run, RunConfig, RunWithMetrics

        self.wandb = wandb
        self.RunState, self.SweepInfo = RunState, SweepInfo
        self.Run, self.RunConfig, self.RunWithMetrics = Run, RunConfig, RunWithMetrics

    @property
    def optuna(self) -> Any:
        """``build_optuna_optimizer``, ``make_optimizer``, ``OptunaOptions``, ``sweep_directions``,
        ``load_trial_constructor``, ``search_space_from_sweep_config``."""
        return importlib.import_module("wandb.sdk.sweeps.scheduler.optuna")

    @property
    def ax(self) -> Any:
        """``build_ax_optimizer``, ``AxOptimizer``, ``sweep_config_to_search_space``, ``configure_sweep_objective``."""
        return importlib.import_module("wandb.sdk.sweeps.scheduler.ax")


_wandb_scheduler: WandbScheduler | None = None


def wandb_scheduler() -> WandbScheduler:
    """wandb's sweep scheduler names (``WandbScheduler``), imported once per process."""
    global _wandb_scheduler
    if _wandb_scheduler is None:
        _wandb_scheduler = WandbScheduler()
    return _wandb_scheduler

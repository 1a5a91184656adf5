"""A stand-in for W&B's server on loopback: the few GraphQL calls and HTTP routes wandb 0.31 makes
to create a sweep, set its state, and start, log to, resume, finish and sync a run, and the two
that ``wandb.agent`` makes (an agent, its heartbeats), so a function runs under wandb's own agent
as the oracle of raysweep.run's one-line move: a test queues the runs (``queue_runs``) that W&B's
controller would propose, and the heartbeat hands them out one at a time, then tells the agent to exit.

No W&B server runs on these machines, and raysweep's online path is a handful of requests that
only W&B's server sees. This answers them the way api.wandb.ai does in shape (not in logic) and
records every call, so tests can assert what each run's ``upsertBucket`` named as its sweep.
Point wandb at it with ``WANDB_BASE_URL``. Calls it does not know get an empty answer and are
recorded under their operation name, so a newer wandb's new call shows up in ``calls``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WANDB_VERSION = "0.31.0"  # whose calls these answers are shaped for
API_KEY = "a" * 40  # wandb checks a key's length, and this server accepts any


@dataclass
class Call:
    operation: str  # a GraphQL operation's name, or "file_stream" / "upload"
    variables: dict[str, Any]


@dataclass
class FakeWandb:
    """The server's state: sweeps it created, runs (entity/project/name) and what each was sent."""

    entity: str = "raysweep-tests"
    url: str = ""  # set by serve()
    calls: list[Call] = field(default_factory=list)
    sweeps: dict[str, dict[str, Any]] = field(default_factory=dict)  # sweep id -> {"state", "runs", "config"}
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # run name -> {"sweep", "history", "project", ...}
    refuse_sweeps: bool = False  # answer upsertSweep with an error, as for a user without rights
    refuse_key: bool = False  # answer every call 401, as for a key W&B does not know
    queued: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sweep name -> configs wandb.agent gets
    agents: dict[str, str] = field(default_factory=dict)  # agent id -> its sweep's name
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Forget every call, sweep and run (a test of a module sharing the server starts clean)."""
        with self.lock:
            self.calls.clear()
            self.sweeps.clear()
            self.runs.clear()
            self.queued.clear()
            self.agents.clear()
            self.refuse_sweeps = self.refuse_key = False

    def queue_runs(self, sweep: str, configs: list[dict[str, Any]]) -> None:
        """The runs W&B's controller proposes for ``sweep`` (by name), in order: ``{param: value}`` each."""
        with self.lock:
            self.queued.setdefault(sweep, []).extend(configs)

    def operations(self) -> list[str]:
        return [call.operation for call in self.calls]

    def answer(self, operation: str, variables: dict[str, Any]) -> dict[str, Any]:
        """The ``data`` of a GraphQL answer (raises to answer with ``errors``)."""
        project = variables.get("project") or variables.get("projectName") or "uncategorized"
        entity = variables.get("entity") or variables.get("entityName") or self.entity
        project_obj = {"id": f"p-{project}", "name": project, "entity": {"id": f"e-{entity}", "name": entity}}
        if operation in ("Viewer", "GetDefaultEntity"):
            viewer = {"id": "u1", "entity": self.entity, "username": "tester", "email": "", "flags": "{}"}
            return {"viewer": {**viewer, "teams": {"edges": []}}}
        if operation == "UpsertSweep":
            return {"upsertSweep": {**self._upsert_sweep(variables, project_obj), "configValidationWarnings": []}}
        if operation == "UpsertBucket":
            return {"upsertBucket": {"bucket": self._upsert_run(variables, project_obj), "inserted": True}}
        if operation == "RunResumeStatus":
            return {"model": {**project_obj, "bucket": self._resume_status(variables)}}
        if operation == "CreateRunFiles":
            files = [{"name": name, "uploadUrl": f"{self.url}/upload/{name}"} for name in variables["files"]]
            return {"createRunFiles": {"runID": variables["run"], "uploadHeaders": [], "files": files}}
        if operation in ("Sweep", "SweepWithRuns", "GetSweepState", "SweepState"):
            sweep = self.sweeps.get(variables.get("sweep") or variables.get("name") or "")
            found = (
                None
                if sweep is None
                else {
                    "id": sweep["id"],
                    "name": sweep["name"],
                    "state": sweep["state"],
                    "config": sweep["config"],
                    "runs": {"edges": []},
                }
            )
            return {"project": {**project_obj, "sweep": found}}
        if operation == "CreateAgent":
            agent = f"agent-{len(self.agents) + 1}"
            self.agents[agent] = variables["sweep"]
            return {"createAgent": {"agent": {"id": agent}}}
        if operation == "Heartbeat":
            return {
                "agentHeartbeat": {"agent": {"id": variables["id"]}, "commands": json.dumps(self._commands(variables))}
            }
        if operation == "OrganizationCoreWeaveOrganizationID":
            return {"entity": {"organization": None}}
        return {}

    def _commands(self, variables: dict[str, Any]) -> list[dict[str, Any]]:
        """The next queued run for the agent's sweep, once no run of it is queued or running; exit at the end."""
        if any(json.loads(variables.get("runState") or "{}").values()):
            return []
        queue = self.queued.get(self.agents.get(variables["id"], ""), [])
        if not queue:
            return [{"type": "exit"}]
        config = queue.pop(0)
        run_id = f"r{len(self.calls):05d}"  # calls only grow: unique
        return [{"type": "run", "run_id": run_id, "args": {k: {"value": v} for k, v in config.items()}}]

    def _upsert_sweep(self, variables: dict[str, Any], project_obj: dict[str, Any]) -> dict[str, Any]:
        if self.refuse_sweeps:
            raise PermissionError("permission denied: this user cannot create sweeps in the project")
        by_id = {sweep["id"]: sweep for sweep in self.sweeps.values()}
        sweep = by_id.get(variables.get("id") or "")
        if sweep is None:
            name = f"sw{len(self.sweeps) + 1:06d}"
            sweep = {
                "id": f"id-{name}",
                "name": name,
                "state": "RUNNING",
                "config": variables.get("config"),
                "runs": [],
            }
            self.sweeps[name] = sweep
        if variables.get("state"):
            sweep["state"] = variables["state"]
        if variables.get("priorRunsFilters"):
            for clause in json.loads(variables["priorRunsFilters"])["$or"]:
                if clause["name"] not in sweep["runs"]:
                    sweep["runs"].append(clause["name"])
        return {"sweep": {"name": sweep["name"], "project": project_obj}}

    def _upsert_run(self, variables: dict[str, Any], project_obj: dict[str, Any]) -> dict[str, Any]:
        name = variables["name"]
        run = self.runs.setdefault(name, {"sweep": None, "history": [], "project": project_obj["name"], "upserts": 0})
        run["upserts"] += 1
        if variables.get("sweep"):
            run["sweep"] = variables["sweep"]
            if variables["sweep"] in self.sweeps and name not in self.sweeps[variables["sweep"]]["runs"]:
                self.sweeps[variables["sweep"]]["runs"].append(name)
        for key in ("groupName", "state"):
            if variables.get(key) is not None:
                run[key] = variables[key]
        return {
            "id": f"run-{name}",
            "name": name,
            "displayName": variables.get("displayName") or name,
            "description": "",
            "config": variables.get("config") or "{}",
            "sweepName": run["sweep"],
            "project": project_obj,
            "historyLineCount": len(run["history"]),
        }

    def _resume_status(self, variables: dict[str, Any]) -> dict[str, Any] | None:
        run = self.runs.get(variables.get("name") or "")
        if run is None:
            return None
        return {
            "id": f"run-{variables['name']}",
            "name": variables["name"],
            "displayName": variables["name"],
            "config": "{}",
            "summaryMetrics": "{}",
            "logLineCount": 0,
            "historyLineCount": len(run["history"]),
            "eventsLineCount": 0,
            "historyTail": "[]",
            "eventsTail": "[]",
            "wandbConfig": "{}",
            "sweepName": run["sweep"],
            "tags": [],
        }

    def file_stream(self, run_name: str, body: dict[str, Any]) -> None:
        run = self.runs.setdefault(run_name, {"sweep": None, "history": [], "upserts": 0})
        history = body.get("files", {}).get("wandb-history.jsonl")
        if history:
            run["history"].extend(json.loads(line) for line in history["content"])
        if "exitcode" in body:
            run["exitcode"] = body["exitcode"]


def serve(state: FakeWandb) -> ThreadingHTTPServer:
    """Serve ``state`` on a free loopback port, on a daemon thread; ``state.url`` is its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, obj: Any, status: int = 200) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:
            self._reply({})

        def do_PUT(self) -> None:  # a run file's upload, to the URL createRunFiles gave
            self._body()
            with state.lock:
                state.calls.append(Call("upload", {"path": self.path}))
            self._reply({})

        def do_POST(self) -> None:
            raw = self._body()
            if state.refuse_key:
                with state.lock:
                    state.calls.append(Call("refused", {"path": self.path}))
                self._reply({"errors": [{"message": "user is not logged in"}]}, status=401)
                return
            if self.path.startswith("/graphql"):
                request = json.loads(raw)
                found = re.search(r"(?:query|mutation)\s+(\w+)", request.get("query", ""))
                operation, variables = (found.group(1) if found else "?"), request.get("variables") or {}
                with state.lock:
                    state.calls.append(Call(operation, variables))
                    try:
                        self._reply({"data": state.answer(operation, variables)})
                    except PermissionError as e:
                        self._reply({"data": None, "errors": [{"message": str(e)}]})
            elif found := re.match(r"/files/[^/]+/[^/]+/([^/]+)/file_stream", self.path):
                body = json.loads(raw or b"{}")
                with state.lock:
                    state.calls.append(Call("file_stream", {"run": found.group(1)}))
                    state.file_stream(found.group(1), body)
                self._reply({"exitcode": None, "limits": {}})
            else:
                self._reply({})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, name="fake-wandb", daemon=True).start()
    return server

"""The Ray backend: one Ray actor per worker slot (:class:`WorkerActor`), each holding a
:class:`~policyopt.executor.backends.LocalProcessBackend` on its node that runs the worker
processes there (:class:`RayBackend`). Ray is imported only when a :class:`RayBackend` is created.
See :mod:`policyopt.executor.backends` for the backend protocol.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .backends import BackendError, Launch, LocalProcessBackend, ProcessHandle, _read_json

__all__ = ["RayBackend", "WorkerActor"]


class WorkerActor:
    """Body of the Ray actor for one worker slot: a :class:`LocalProcessBackend` on its node."""

    def __init__(self, run_dir: str, launcher: str, env: Mapping[str, str], node: str,
                 warm_job_types: Sequence[str] | None = None, warm_threads: Sequence[int] | None = None) -> None:
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        self.backend = LocalProcessBackend(run_dir, launcher, env, node=self.node_id, tied=True,
                                           warm_job_types=warm_job_types, warm_threads=warm_threads)

    def warm_up(self) -> str:
        """Start the fork server; returns the Ray node id this slot lives on."""
        self.backend.warm_up()
        return self.node_id

    def rendezvous(self) -> tuple[str, int]:
        return self.backend.rendezvous("")

    def start(self, launch: dict[str, Any]) -> dict[str, Any]:
        """Start on this node: a CUDA slot uses the GPU Ray assigned to the actor (``cuda:0`` inside
        its ``CUDA_VISIBLE_DEVICES``); pinned cores this node does not have are dropped."""
        spec = Launch.from_dict(launch)
        if spec.device.startswith("cuda") and os.environ.get("CUDA_VISIBLE_DEVICES"):
            spec = replace(spec, device="cuda:0")
        if spec.cpu_affinity is not None and hasattr(os, "sched_getaffinity") \
                and not set(spec.cpu_affinity) <= os.sched_getaffinity(0):
            spec = replace(spec, cpu_affinity=None)
        return self.backend.start(spec).to_dict()

    def renew(self, handle: dict[str, Any], lease: dict[str, Any]) -> None:
        self.backend.renew(ProcessHandle.from_dict(handle), lease)

    def stop(self, handle: dict[str, Any]) -> None:
        self.backend.stop(ProcessHandle.from_dict(handle))

    def kill(self, handle: dict[str, Any]) -> None:
        self.backend.kill(ProcessHandle.from_dict(handle))

    def poll(self, handle: dict[str, Any]) -> int | None:
        return self.backend.poll(ProcessHandle.from_dict(handle))

    def progress(self, handle: dict[str, Any]) -> dict[str, Any] | None:
        return self.backend.progress(ProcessHandle.from_dict(handle))

    def log_tail(self, handle: dict[str, Any], lines: int = 5) -> str:
        return self.backend.log_tail(ProcessHandle.from_dict(handle), lines)

    def retire(self, handle: dict[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
        return self.backend.retire(handle, timeout)

    def close(self) -> None:
        self.backend.close()


class RayBackend:
    """One Ray actor per worker slot, each running the workers of its slot on its node.

    ``slots``: the cluster's :class:`~policyopt.executor.cluster.Slot` list. ``address``: passed to
    ``ray.init`` (``None`` starts a local Ray instance, ``"auto"`` joins a running cluster).
    ``resource_prefix``: when set, the actor of a slot of worker type ``t`` requests one unit of
    the custom resource ``f"{resource_prefix}{t}"`` (declare it with ``ray start --resources``), so
    worker types map to the nodes that really have them; CUDA slots also request ``num_gpus=1``.
    ``run_dir`` must be a path that exists on every node (shared storage for checkpoints).
    ``namespace`` and ``run_id`` name the actors (detached), so an executor restarted against a
    running cluster finds them again. ``warm_job_types`` (the run's job types): each slot's fork
    server warms only their families, on its slot's thread count (``None``: every family).

    Nodes: :meth:`slot_nodes` gives the node of every slot whose actor is up on a node Ray reports
    alive. A slot whose node died is absent; a new actor for it is requested at once and the slot
    is back as soon as that actor runs (on a node that joined and offers the slot's type). The
    processes of a dead node's actor end with it (the fork server and its workers are tied to
    the actor). A call to an actor that is gone raises :class:`BackendError`.
    """

    name = "ray"

    def __init__(self, slots: Sequence[Any], run_dir: str | Path, *, address: str | None = None,
                 launcher: str = "fork", resource_prefix: str | None = None, namespace: str = "policyopt",
                 run_id: str = "run", init_options: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None, warm_job_types: Sequence[str] | None = None) -> None:
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise BackendError("the Ray backend needs the 'ray' package (pip install 'ray[default]')") from exc
        self._ray = ray
        if not ray.is_initialized():
            options: dict[str, Any] = {"namespace": namespace, "include_dashboard": False, "log_to_driver": False}
            options.update(init_options or {})
            # None: a new local instance (Ray's "local"; ray.init(address=None) would join the cluster named
            # by RAY_ADDRESS or /tmp/ray/ray_current_cluster, e.g. any Ray head started on this machine)
            ray.init(address="local" if address is None else address, **options)
        root = str(Path(__file__).resolve().parents[2])
        self._env = {"PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                     **{str(k): str(v) for k, v in (env or {}).items()}}
        self._remote = ray.remote(WorkerActor)
        self._run_dir = Path(run_dir)
        self._launcher = launcher
        self._prefix = resource_prefix
        self._run_id = run_id
        self.slots = list(slots)
        self._warm_types = None if warm_job_types is None else sorted({str(t) for t in warm_job_types})
        self._actors: dict[str, Any] = {}
        self._ready: dict[str, Any] = {}  # worker id -> pending warm_up reference (actor not confirmed yet)
        self._nodes: dict[str, str] = {}  # worker id -> node id, for actors that are up
        self._dead: set[str] = set()  # worker ids whose actor call failed: the actor is gone
        for slot in self.slots:
            self._create(slot)

    def _create(self, slot: Any) -> None:
        opts: dict[str, Any] = {"name": f"policyopt-{self._run_id}-{slot.worker_id}", "lifetime": "detached",
                                "get_if_exists": True, "num_cpus": 0, "max_concurrency": 4}
        if slot.device.startswith("cuda"):
            opts["num_gpus"] = 1
        if self._prefix:
            opts["resources"] = {f"{self._prefix}{slot.worker_type}": 1}
        actor: Any = self._remote.options(**opts).remote(str(self._run_dir / "nodes" / slot.worker_id), self._launcher,
                                                    self._env, slot.worker_id, self._warm_types,
                                                    None if self._warm_types is None else [slot.threads])
        self._actors[slot.worker_id] = actor
        self._ready[slot.worker_id] = actor.warm_up.remote()

    def warm_up(self, timeout: float = 600.0) -> None:
        """Wait until every slot's actor runs and its fork server is ready (the starting cluster)."""
        refs = dict(self._ready)
        done, _ = self._ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        missing = [w for w, r in refs.items() if r not in done]
        if missing:
            raise BackendError(f"no Ray node took slot(s) {', '.join(missing)} within {timeout:.0f} s "
                               f"(does a node offer the resource {self._prefix or ''}<worker type>?)")
        self._collect(list(refs))

    def _collect(self, workers: Sequence[str]) -> None:
        for w in workers:
            ref = self._ready.pop(w)
            try:
                self._nodes[w] = str(self._ray.get(ref, timeout=60))
            except Exception as exc:  # noqa: BLE001 - an actor that died while starting: ask again later
                self._nodes.pop(w, None)
                self._ready[w] = ref
                raise BackendError(f"slot {w}: its actor failed to start: {exc}") from exc

    def slot_nodes(self, worker_ids: Sequence[str] = ()) -> dict[str, str]:
        """Worker id -> Ray node id of every slot whose actor runs on a live node (see the class);
        ``worker_ids`` (all when empty) filters the answer."""
        alive = {n["NodeID"] for n in self._ray.nodes() if n.get("Alive")}
        by_id = {s.worker_id: s for s in self.slots}
        for w, node in list(self._nodes.items()):
            if node not in alive or w in self._dead:  # the node died, and the actor with it: ask for a new one
                del self._nodes[w]
                try:
                    self._ray.kill(self._actors[w])
                except Exception:  # noqa: BLE001, S110 - it is gone already
                    pass
                self._create(by_id[w])
        self._dead.clear()
        if self._ready:
            done, _ = self._ray.wait(list(self._ready.values()), num_returns=len(self._ready), timeout=0)
            for w in [w for w, r in self._ready.items() if r in done]:
                try:
                    self._collect([w])
                except BackendError:
                    self._create(by_id[w])
        wanted = set(worker_ids) or set(by_id)
        return {w: n for w, n in self._nodes.items() if n in alive and w in wanted}

    def _actor(self, workers: Sequence[str]) -> Any:
        if not workers or workers[0] not in self._nodes:
            raise BackendError(f"no running Ray actor for workers {list(workers)}")
        return self._actors[workers[0]]

    def _get(self, ref: Any, timeout: float = 120.0) -> Any:
        try:
            return self._ray.get(ref, timeout=timeout)
        except self._ray.exceptions.RayActorError as exc:
            raise BackendError(f"the Ray actor is gone: {exc}") from exc

    def _call(self, workers: Sequence[str], method: str, *args: Any, timeout: float = 120.0) -> Any:
        try:
            return self._get(getattr(self._actor(workers), method).remote(*args), timeout)
        except BackendError:
            self._dead.add(workers[0])  # its actor (its node) is gone, even before Ray marks the node dead
            raise

    def rendezvous(self, worker_id: str) -> tuple[str, int]:
        addr, port = self._call([worker_id], "rendezvous")
        return str(addr), int(port)

    def start(self, launch: Launch) -> ProcessHandle:
        return ProcessHandle.from_dict(self._call(launch.workers, "start", launch.to_dict()))

    def renew(self, handle: ProcessHandle, lease: Mapping[str, Any]) -> None:
        self._call(handle.workers, "renew", handle.to_dict(), dict(lease))

    def stop(self, handle: ProcessHandle) -> None:
        self._call(handle.workers, "stop", handle.to_dict())

    def kill(self, handle: ProcessHandle) -> None:
        self._call(handle.workers, "kill", handle.to_dict())

    def poll(self, handle: ProcessHandle) -> int | None:
        return self._call(handle.workers, "poll", handle.to_dict())

    def progress(self, handle: ProcessHandle) -> dict[str, Any] | None:
        try:
            return self._call(handle.workers, "progress", handle.to_dict())
        except BackendError:  # the run directory is shared storage: read the record left behind
            record = _read_json(handle.progress_file)
            return record if record is None or record.get("pid") in (None, handle.pid) else None

    def log_tail(self, handle: ProcessHandle, lines: int = 5) -> str:
        return str(self._call(handle.workers, "log_tail", handle.to_dict(), lines))

    def retire(self, handle: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
        workers = list(handle.get("workers") or ())
        if not workers or workers[0] not in self._nodes:
            return None
        return self._call(workers, "retire", dict(handle), timeout, timeout=timeout + 60)

    def close(self) -> None:
        """Stop the actors' fork servers and kill the actors (the run is over)."""
        for w, actor in self._actors.items():
            if w in self._nodes:
                try:
                    self._get(actor.close.remote(), 90)
                except Exception:  # noqa: BLE001, S110 - best effort at shutdown
                    pass
            try:
                self._ray.kill(actor)
            except Exception:  # noqa: BLE001, S110
                pass
        self._actors.clear()
        self._nodes.clear()
        self._ready.clear()

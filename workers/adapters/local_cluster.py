"""A local simulated cluster: namespaces, pods and volumes as real files and directories.

``<root>/<namespace>/volumes/<claim>/`` is a volume, ``<root>/<namespace>/pods/<pod>.json``
a pod. The scratch claim must match the contract (10Gi, class ``scratch``, RWO) or the pod
is refused. A pod is ready ``boot_seconds`` after it was created (by the caller's clock),
so the stale window can be reached. Pod files are created exclusively, so controllers
provisioning the same generation at once end with one pod (written aside, then linked).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

from domain.workspaces.policies import scratch_claim_problem, seconds_between
from domain.workspaces.ports import Pod, ProvisionRefused, WorkspaceSpec


class LocalCluster:
    def __init__(self, root: Path, *, boot_seconds: float = 0.0) -> None:
        self.root = Path(root)
        self.boot_seconds = boot_seconds

    def _pods_dir(self, namespace: str) -> Path:
        return self.root / namespace / "pods"

    def volume_path(self, namespace: str, claim: str) -> Path:
        return self.root / namespace / "volumes" / claim

    def up(self, spec: WorkspaceSpec, now: str) -> Pod:
        scratch = [v for v in spec.volumes if v.name == "scratch"]
        if len(scratch) != 1:
            raise ProvisionRefused("a workspace needs exactly one scratch claim")
        problem = scratch_claim_problem(scratch[0].size, scratch[0].storage_class, scratch[0].access_mode)
        if problem:
            raise ProvisionRefused(problem)
        name = f"{spec.scope}-g{spec.generation}"
        return self.create_pod(spec.namespace, spec.scope, name, now, spec.env, now)

    def create_pod(self, namespace: str, scope: str, name: str, created_at: str, env: dict[str, str], now: str) -> Pod:
        pods = self._pods_dir(namespace)
        pods.mkdir(parents=True, exist_ok=True)
        pvc = f"{name}-scratch"
        self.volume_path(namespace, f"{scope}-home").mkdir(parents=True, exist_ok=True)
        self.volume_path(namespace, pvc).mkdir(parents=True, exist_ok=True)
        record = {"name": name, "scope": scope, "pvc": pvc, "created_at": created_at, "env": env}
        path = pods / f"{name}.json"
        # Written aside, then linked into place: the link either creates the whole pod or
        # finds another controller's, never a half-written file.
        tmp = pods / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(record))
        try:
            os.link(tmp, path)
        except FileExistsError:
            record = json.loads(path.read_text())
        finally:
            tmp.unlink(missing_ok=True)
        return self._pod(record, now)

    def _pod(self, record: dict[str, object], now: str) -> Pod:
        created = str(record["created_at"])
        ready = seconds_between(created, now) >= self.boot_seconds if now else True
        return Pod(name=str(record["name"]), scope=str(record["scope"]), pvc=str(record["pvc"]), created_at=created, ready=ready)

    def pods(self, namespace: str, scope: str) -> list[Pod]:
        found = []
        for path in sorted(self._pods_dir(namespace).glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if record.get("scope") == scope:
                found.append(self._pod(record, ""))
        return sorted(found, key=lambda p: (p.created_at, p.name))

    def remove(self, namespace: str, pod_name: str) -> None:
        path = self._pods_dir(namespace) / f"{pod_name}.json"
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            return
        path.unlink(missing_ok=True)
        shutil.rmtree(self.volume_path(namespace, str(record["pvc"])), ignore_errors=True)

    def stop(self, namespace: str, scope: str) -> list[str]:
        removed = []
        for pod in self.pods(namespace, scope):
            self.remove(namespace, pod.name)
            removed.append(pod.name)
        return removed

"""The recovery figures of the cluster bench (``cuzk bench cluster``).

Node loss (``node_losses``): the GPU node removed without a graceful exit while a job's GPU
phases run, and a new GPU node added; per repetition the seconds from the removal to the job's
success, jobs lost and partitions proven more than once (both must stay 0).

Head restart (``head_restart``): a real ``cuzk serve --cluster`` head killed with SIGKILL while
a job is partly journaled, then started again on the same journal. Per run: seconds from the
new start to ``/readyz`` 200 (the journal replayed, the detached GPU worker found by name; the
new CPU workers are placed and join as they answer, not waited for) and to the resumed job's
success (which waits for a CPU worker); and the key loads the restart cost the GPU worker (0
when its key stayed resident). The CPU prover plays the GPU, so the job time is this machine's,
not a GPU's. ``cuzk bench cluster --only-head-restart`` runs this drill alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cuzk.protocol import TERMINAL_STATES

KIND = "winning-post"


def node_losses(engine: Any, executor: Any, cluster: Any, reps: int, kind: str,
                partitions: int) -> dict[str, Any]:
    """``reps`` removals of the GPU node mid-job (scripted prover, 0.2 s GPU phases)."""
    import ray

    from cuzk.cluster.local import add_gpu_node

    recovered: list[float] = []
    noticed: list[float] = []  # removal -> the head drops the node (Ray's health checks)
    joined: list[float] = []  # removal -> the new node's workers answer and it joins
    lost = duplicates = 0
    for rep in range(reps):
        gpu = _bound_gpu(executor)
        ray.get(gpu.script_delay.remote("gpu", 0.2))  # a job long enough to be hit
        job = engine.submit(kind, [{"tag": f"loss{rep}-{i}"} for i in range(partitions)])
        bound = time.monotonic() + 120
        while ray.get(gpu.snapshot.remote())["state"] != "proving":
            if engine.get(job.id).terminal or time.monotonic() > bound:
                raise RuntimeError("the GPU phase never started before the node was removed")
            time.sleep(0.01)
        removed_at, removed_wall = time.monotonic(), time.time()
        cluster.remove_node(next(iter(cluster.worker_nodes)), allow_graceful=False)
        add_gpu_node(cluster)
        done = engine.wait(job.id, 300)
        if done.outcome != "succeeded":
            lost += 1
            continue
        recovered.append(time.monotonic() - removed_at)
        changes = [(t - removed_wall, what) for t, what, _ in list(executor.membership_changes)
                   if t >= removed_wall]
        for what, into in (("leave", noticed), ("join", joined)):
            into += [t for t, w in changes if w == what][:1]
        tags = [tuple(public) for _, public in done.view().proofs or ()]
        duplicates += len(tags) - len(set(tags))
        if sorted(set(tags)) != sorted((f"loss{rep}-{i}",) for i in range(partitions)):
            lost += 1
    return {"node_loss_reps": reps, "node_loss_recovered_s": recovered,
            "node_loss_noticed_s": noticed, "node_loss_joined_s": joined,
            "node_loss_jobs_lost": lost, "node_loss_duplicate_proofs": duplicates}


def _bound_gpu(executor: Any, timeout: float = 300.0) -> Any:
    """The GPU worker bound to slot-0 (a new node's worker is placed after it joins)."""
    bound = time.monotonic() + timeout
    while (gpu := executor.gpu_actor("slot-0")) is None:
        if time.monotonic() > bound:
            raise RuntimeError(f"no GPU worker bound within {timeout:g} s")
        time.sleep(0.05)
    return gpu


def head_restart(address: str, gpu_name: str, runs: int, partitions: int,
                 workdir: Path) -> dict[str, Any]:
    """``runs`` kill -9 / restart cycles of a head at ``address``, each on a fresh journal."""
    import httpx
    import ray

    from cuzk.circuits.registry import bundled_circuits
    from cuzk.cluster import NAMESPACE
    from cuzk.serve_process import ServeProcess, read_journal, serve_env

    inputs = json.loads(Path(bundled_circuits()[KIND].sample_input_path).read_text())
    ready_s: list[float] = []
    done_s: list[float] = []
    loads: list[int] = []
    journaled: list[int] = []
    stages: list[dict[str, float]] = []  # per restart: seconds from the start to each stage
    for run in range(runs):
        journal = workdir / f"journal-{run}.sqlite3"
        kind_env = f"CUZK_PROOF_KINDS_{KIND.upper().replace('-', '_')}"
        env = serve_env(journal, None) | {
            "CUZK_CLUSTER_SD_FILE": str(workdir / "cuzk_sd.json"),
            f"{kind_env}_PARTITIONS": str(partitions),
            f"{kind_env}_DEADLINE": ""}  # a resumed job must finish, not miss a deadline
        server = ServeProcess(env, ("--cluster", address))
        try:
            server.start(timeout=300)
            server.ready(timeout=300)
            r = httpx.post(f"{server.url}/v1/proofs", timeout=30,
                           json={"proof_kind": KIND, "inputs": [inputs] * partitions})
            r.raise_for_status()
            job_id = r.json()["id"]
            bound = time.monotonic() + 600
            while not [i for (j, i) in read_journal(journal)[1] if j == job_id]:
                if time.monotonic() > bound:
                    raise RuntimeError("no partition journaled within 600 s")
                time.sleep(0.02)
            server.kill()
            journaled.append(sum(1 for (j, _) in read_journal(journal)[1] if j == job_id))
            gpu = ray.get_actor(gpu_name, namespace=NAMESPACE)
            before = ray.get(gpu.snapshot.remote())["key_loads"]
            t0, t0_wall = time.monotonic(), time.time()
            server = ServeProcess(env, ("--cluster", address))
            server.start(timeout=300)
            server.ready(timeout=300)
            ready_s.append(time.monotonic() - t0)
            while True:
                body = httpx.get(f"{server.url}/v1/proofs/{job_id}", params={"wait": 10},
                                 timeout=30).json()
                if body["state"] in TERMINAL_STATES:
                    break
            if body["state"] != "succeeded":
                raise RuntimeError(f"resumed job ended {body['state']}: {body.get('error')}")
            done_s.append(time.monotonic() - t0)
            # read once the job is done: its CPU workers answered (logged) before it could be
            stages.append(restart_stages(server.output, t0_wall))
            loads.append(ray.get(gpu.snapshot.remote())["key_loads"] - before)
        finally:
            server.kill()
    return {
        "head_restart_partitions": partitions,
        "head_restart_journaled_at_kill": journaled,
        "head_restart_ready_s": ready_s,
        "head_restart_job_done_s": done_s,
        "head_restart_key_loads": loads,
        "head_restart_stages_s": stages,
    }


STAGES = (
    ("connecting", "cluster: connecting to the Ray cluster"),
    ("connected", "Connected to Ray cluster"),
    ("gpu_worker_found", "from an earlier head with keys"),
    ("nodes_joined", "cluster: "),  # "cluster: N node(s); file_sd targets in ..."
    ("listening", "cuzk listening on "),
    ("first_cpu_worker", "answered ("),  # "cluster node N: CPU worker C answered (1 of 1)"
)
"""Where a restarted head's time goes: the first log line of each stage (the last node's join
is logged just before "cluster: N node(s)"). The head listens once a GPU worker answers; its
new CPU workers answer when their processes have started, usually after it listens, and the
resumed job's first synthesis waits for the first of them."""


def restart_stages(output: str, t0_wall: float) -> dict[str, float]:
    """Seconds from ``t0_wall`` (the process's start) to each stage's log line (local times,
    millisecond resolution); a stage not logged is absent."""
    import re
    from datetime import datetime

    stamp = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
    out: dict[str, float] = {}
    for line in output.splitlines():
        m = stamp.match(line)
        if m is None:
            continue
        for name, text in STAGES:
            if name in out or text not in line:
                continue
            if name == "nodes_joined" and "node(s); file_sd" not in line:
                continue
            if name == "first_cpu_worker" and "CPU worker " not in line:
                continue
            when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out[name] = round(when - t0_wall, 2)
    return out

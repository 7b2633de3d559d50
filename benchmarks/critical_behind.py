"""Drill for issue 27: a winning-post submitted behind two porep-c2, real CPU prover, in-process.

What it measures (and how, so a later run compares like with like):

- idle latency: a winning-post alone on the started engine (key resident, one warm-up job
  first), submit to done (``Job.duration_s``), the median of ``--idle`` runs;
- the porep-c2 GPU phase at idle: ``prover.gpu_phase`` of one porep-c2 partition alone,
  timed around the call, the median of 3 (nothing else running in this process);
- each run: two porep-c2 jobs submitted, then, as soon as every regular GPU worker holds a
  porep-c2 lease (both GPU phases under way), a winning-post with its default deadline
  (policy ``reject``); its latency is submit to done. The porep-c2 ``proving`` phases that
  ended during the run are recorded too (the GPU phase under the run's load). The 1-minute
  load average is read from /proc/loadavg when the winning-post is submitted.

Target: latency <= idle latency + one porep-c2 GPU phase at idle. The porep-c2 jobs are
cancelled once the winning-post is done, and the engine waits until it is quiescent.

    PYTHONPATH=. python benchmarks/critical_behind.py --runs 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from typing import Any


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--idle", type=int, default=3)
    ap.add_argument("--reserved-gpu-workers", type=int, default=None,
                    help="engine.reserved_gpu_workers_per_device (default: the engine's)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from cuzk.bench.samples import sample_inputs
    from cuzk.engine.engine import Engine
    from cuzk.engine.events import PartitionPhaseEnded
    from cuzk.engine.settings import EngineSettings, default_proof_kinds
    from cuzk.errors import DeadlineInfeasible
    from cuzk.prover.real_prover import RealProver

    settings = EngineSettings(backend="cpu", proof_kinds=default_proof_kinds(),
                              tracing_enabled=False, metrics_enabled=False)
    if args.reserved_gpu_workers is not None and hasattr(settings,
                                                          "reserved_gpu_workers_per_device"):
        settings = replace(settings, reserved_gpu_workers_per_device=args.reserved_gpu_workers)
    prover = RealProver(settings)
    engine = Engine(settings, prover)
    engine.start()
    wp_in = [sample_inputs("winning-post")]
    pc_in = [sample_inputs("porep-c2")] * settings.proof_kinds["porep-c2"].partitions
    proving: list[tuple[str, float]] = []

    def on_event(ev: Any) -> None:
        if isinstance(ev, PartitionPhaseEnded) and ev.phase == "proving":
            proving.append((ev.proof_kind, ev.seconds))

    engine.subscribe(on_event)
    out: dict[str, Any] = {"settings": {
        "synthesis_threads": settings.synthesis_threads,
        "gpu_workers_per_device": settings.gpu_workers_per_device,
        "reserved_gpu_workers_per_device": getattr(
            settings, "reserved_gpu_workers_per_device", 0),
        "finalizer_threads": settings.finalizer_threads}}
    try:
        for kind in ("winning-post", "porep-c2"):
            engine.preload(kind)
        engine.wait(engine.submit("winning-post", wp_in).id, 120)  # warm-up
        idle = []
        for _ in range(args.idle):
            job = engine.wait(engine.submit("winning-post", wp_in).id, 120)
            idle.append(job.duration_s())
        idle_s = statistics.median(idle)
        # one porep-c2 partition's GPU phase, alone
        handle = prover.load_key("porep-c2")
        gpu = []
        for _ in range(3):
            syn = prover.synthesize(handle, pc_in[0])
            t = time.perf_counter()
            prover.gpu_phase(handle, syn, prover.devices[0])
            gpu.append(time.perf_counter() - t)
            prover.discard(syn)
        gpu_s = statistics.median(gpu)
        target = idle_s + gpu_s
        out.update(idle_latency_s=idle, idle_median_s=idle_s, porep_gpu_phase_idle_s=gpu,
                   porep_gpu_phase_idle_median_s=gpu_s, target_s=target, runs=[])
        print(f"idle winning-post {idle_s:.2f} s {[round(x, 2) for x in idle]}; porep-c2 GPU "
              f"phase at idle {gpu_s:.2f} s {[round(x, 2) for x in gpu]}; target {target:.2f} s",
              flush=True)
        regular = [w for w in engine.workers if not getattr(w, "reserved", False)]
        for i in range(args.runs):
            proving.clear()
            porep = [engine.submit("porep-c2", pc_in) for _ in range(2)]
            t_end = time.monotonic() + 300
            while time.monotonic() < t_end:
                leases = [w.current() for w in regular]
                if all(ls is not None and ls.job.proof_kind == "porep-c2" for ls in leases):
                    break
                time.sleep(0.01)
            load = loadavg()
            run: dict[str, Any] = {"load1": load}
            try:
                wp = engine.submit("winning-post", wp_in)
            except DeadlineInfeasible as exc:
                run.update(admitted=False, error=str(exc))
            else:
                engine.wait(wp.id, 120)
                run.update(admitted=True, latency_s=wp.duration_s(), state=wp.state,
                           missed=wp.deadline_missed,
                           worker=wp.partitions[0].worker_id,
                           phase_ms=wp.partitions[0].phase_ms())
            for j in porep:
                engine.cancel(j.id)
            t_end = time.monotonic() + 300
            while not engine.quiescent() and time.monotonic() < t_end:
                time.sleep(0.05)
            run["porep_proving_s"] = [round(s, 3) for k, s in proving if k == "porep-c2"]
            run["within"] = bool(run.get("admitted")) and run["latency_s"] <= target
            out["runs"].append(run)
            lat = run.get("latency_s")
            print(f"run {i + 1}: load {load:.1f} latency "
                  f"{'refused' if lat is None else f'{lat:.2f} s'} worker {run.get('worker')} "
                  f"within={run['within']} porep proving {run['porep_proving_s']}", flush=True)
        n = sum(r["within"] for r in out["runs"])
        missed = sum(bool(r.get("missed")) for r in out["runs"])
        print(f"{n}/{len(out['runs'])} within target {target:.2f} s; admitted then missed: "
              f"{missed}", flush=True)
    finally:
        engine.shutdown(60)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

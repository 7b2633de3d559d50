"""A job submitted with witnesses survives a restart like any job: its witness is on disk
(fsynced, named by the journal) before the submit returns, the next start proves it from
there, and the file goes once the job settles. A witness damaged on disk meanwhile fails its
job with a message that says so, never proves other bytes; stray files are swept at start."""

from __future__ import annotations

import shutil
from pathlib import Path

from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.engine.witnesses import WitnessRef
from cuzk.formats.wtns import write_wtns
from cuzk.prover.real_prover import RealProver
from cuzk.prover.verify import verify

KIND = "winning-post"


def _engine(journal: Path, zkey: Path) -> Engine:
    settings = EngineSettings(
        backend="cpu", synthesis_threads=1, finalizer_threads=1, memory_budget_bytes=1 << 30,
        journal_path=journal,
        proof_kinds={KIND: ProofKindSettings(KIND, 1, "critical", zkey=zkey)},
    )
    return Engine(settings, RealProver(settings)).start()


def _submit(engine: Engine, wtns: Path) -> str:
    with engine.witnesses.staging() as staged:
        shutil.copy(wtns, staged)
        return engine.submit(KIND, [], witness_body=staged).id


def test_a_witness_job_survives_a_restart(bundled, tmp_path):
    b = bundled(KIND)
    wtns = tmp_path / "p0.wtns"
    write_wtns(wtns, b.circuit.calculate_witness(b.inputs), b.key.curve)
    journal = tmp_path / "state" / "journal.sqlite3"

    first = _engine(journal, b.zkey_path)
    first.pause_workers()  # nothing is proven before the restart
    kept, damaged = _submit(first, wtns), _submit(first, wtns)
    store = first.witnesses.directory
    first.shutdown(timeout=10)
    assert sorted(p.name for p in store.iterdir()) == sorted([f"{kept}.wtns",
                                                          f"{damaged}.wtns"])
    (store / "upload-cut-short.wtns").write_bytes(b"wtns")  # an upload the crash cut short
    raw = bytearray((store / f"{damaged}.wtns").read_bytes())
    raw[-1] ^= 1
    (store / f"{damaged}.wtns").write_bytes(raw)

    second = _engine(journal, b.zkey_path)
    try:
        assert not (store / "upload-cut-short.wtns").exists()
        recovered = second.get(kept)
        assert isinstance(recovered.partitions[0].inputs, WitnessRef)
        job = second.wait(kept, 120).to_dict()
        assert job["state"] == "succeeded", job
        (entry,) = job["proofs"]
        assert verify(b.key.verification_key, entry["proof"], entry["public"])
        bad = second.wait(damaged, 120).to_dict()
        assert bad["state"] == "failed", bad
        assert bad["error"].startswith("partition 0: the submitted witness in ")
        assert "is damaged on disk" in bad["error"]
        assert second.get(kept).settled.wait(10) and second.get(damaged).settled.wait(10)
        assert list(store.iterdir()) == []  # both settled: their files are gone
        assert second.recovered()[(KIND, "resumed")] == 2
    finally:
        second.shutdown(timeout=10)

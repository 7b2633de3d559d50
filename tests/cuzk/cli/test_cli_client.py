"""`cuzk submit` and `cuzk status` against a real engine behind the real app."""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from starlette.testclient import TestClient

from cuzk.circuits.registry import bundled_circuits
from cuzk.cli import status as status_cmd
from cuzk.cli import submit as submit_cmd
from cuzk.cli._http import CliError
from cuzk.cli.main import main
from cuzk.engine.engine import Engine
from cuzk.simulated_prover import ScriptedProver

# Starlette's TestClient nags about httpx and per-request timeouts; neither matters here.
pytestmark = pytest.mark.filterwarnings("ignore::starlette.exceptions.StarletteDeprecationWarning")


def submit_args(**kw: Any) -> argparse.Namespace:
    base = {
        "proof_kind": "porep-c2",
        "input": None,
        "server": None,
        "out": None,
        "request_id": None,
        "priority": None,
        "timeout": 20.0,
        "no_wait": False,
    }
    return argparse.Namespace(**(base | kw))


def run_submit(client: TestClient, **kw: Any) -> tuple[int, str, str]:
    err = io.StringIO()
    out = io.StringIO()
    console = Console(file=err, width=120, force_terminal=False)
    code = submit_cmd.submit(client, submit_args(**kw), console=console, out=out)
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- submit


def test_submit_default_input_writes_proof_files(
    client: TestClient, prover: ScriptedProver, tmp_path: Path
) -> None:
    sample = json.loads(bundled_circuits()["porep-c2"].sample_input_path.read_text())
    seen: list[dict[str, Any]] = []
    # A gate whose matcher never matches holds nothing; it only records the inputs of every
    # prover step (load_key sees {"tag": kind}; the others see the partition inputs).
    prover.hold("synthesize", lambda inputs: bool(seen.append(dict(inputs))))
    code, out, err = run_submit(client, out=str(tmp_path / "proofs"), request_id="r-1")
    assert code == 0, err
    assert "3/3" in err  # the progress bar finished all partitions
    job_id = out.split()[1]
    assert f"job {job_id} succeeded" in out and "3 proofs written to" in out
    files = sorted(p.name for p in (tmp_path / "proofs").iterdir())
    assert files == [f"{k}_{i}.json" for k in ("proof", "public") for i in range(3)]
    proof = json.loads((tmp_path / "proofs" / "proof_0.json").read_text())
    assert proof["protocol"] == "groth16"
    assert client.get(f"/v1/proofs/{job_id}").json()["request_id"] == "r-1"
    partition_inputs = [x for x in seen if x != {"tag": "porep-c2"}]
    assert len(partition_inputs) >= 3 and all(x == sample for x in partition_inputs)
    assert prover.calls["synthesize"] == 3  # the bundled sample input, once per partition


def test_submit_input_file_array_and_object(
    client: TestClient, prover: ScriptedProver, tmp_path: Path
) -> None:
    arr = tmp_path / "inputs.json"
    arr.write_text(json.dumps([{"tag": "1"}, {"tag": "2"}, {"tag": "3"}]))
    code, _, err = run_submit(client, input=str(arr), out=str(tmp_path / "a"))
    assert code == 0, err
    publics = [json.loads((tmp_path / "a" / f"public_{i}.json").read_text()) for i in range(3)]
    assert publics == [["1"], ["2"], ["3"]]

    one = tmp_path / "one.json"
    one.write_text(json.dumps({"tag": "4"}))
    code, _, err = run_submit(
        client, proof_kind="winning-post", input=str(one), out=str(tmp_path / "w")
    )
    assert code == 0, err
    assert json.loads((tmp_path / "w" / "public_0.json").read_text()) == ["4"]


def test_submit_reports_a_failed_job(
    client: TestClient, prover: ScriptedProver, tmp_path: Path
) -> None:
    prover.fail("finalize", "11", RuntimeError("self-verification failed"))
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps([{"tag": "10"}, {"tag": "11"}, {"tag": "12"}]))
    code, _, err = run_submit(client, input=str(inputs), out=str(tmp_path / "out"))
    assert code == 1
    assert "failed" in err and "self-verification failed" in err
    assert not (tmp_path / "out").exists()


def test_submit_refusals_are_clear(client: TestClient, tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"no proof kind 'nope' \(available: porep-c2"):
        run_submit(client, proof_kind="nope")
    bad = tmp_path / "two.json"
    bad.write_text(json.dumps([{}, {}]))
    with pytest.raises(CliError, match="2 partition inputs, but 'porep-c2' takes 3"):
        run_submit(client, input=str(bad))
    bad.write_text("{oops")
    with pytest.raises(CliError, match="not valid JSON"):
        run_submit(client, input=str(bad))
    with pytest.raises(CliError, match="cannot read"):
        run_submit(client, input=str(tmp_path / "missing.json"))


def test_submit_no_wait(client: TestClient) -> None:
    code, out, _ = run_submit(client, no_wait=True)
    assert code == 0 and out.startswith("job ") and "accepted" in out


def test_submit_timeout_leaves_the_job_running(client: TestClient, engine: Engine) -> None:
    engine.pause_workers()
    with pytest.raises(CliError, match="continues on the server"):
        run_submit(client, timeout=0.3)
    engine.resume_workers()


def test_submit_through_main_over_real_http(
    server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["submit", "winning-post", "--server", server_url, "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "succeeded" in captured.out
    assert (tmp_path / "proof_0.json").exists() and (tmp_path / "public_0.json").exists()


# --------------------------------------------------------------------------- status


def render_text(snapshot: dict[str, Any], **kw: Any) -> str:
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    console.print(status_cmd.render(snapshot, server="http://cuzk", **kw))
    return console.export_text()


def test_status_frame_shows_proving_workers_and_phases(
    client: TestClient, prover: ScriptedProver
) -> None:
    """One frame while two partitions are held in their GPU phase (both workers busy) and the
    third waits in the GPU queue behind them."""
    gates = [prover.hold("gpu", f"50{i}") for i in range(3)]
    job = client.post(
        "/v1/proofs",
        json={"proof_kind": "porep-c2", "inputs": [{"tag": f"50{i}"} for i in range(3)]},
    ).json()
    try:
        assert gates[0].wait_entered() and gates[1].wait_entered()
        deadline = time.monotonic() + 10
        while True:
            snapshot = client.get("/v1/status").json()
            phases = [p["phase"] for p in snapshot["jobs"][0]["partitions"]]
            if phases == ["proving", "proving", "queued_gpu"]:
                break
            assert time.monotonic() < deadline, phases
            time.sleep(0.01)
        text = render_text(snapshot)
    finally:
        for g in gates:
            g.release()
    lines = text.splitlines()
    workers = [line.split() for line in lines if line.lstrip().startswith("cpu-")]
    assert [w[3] for w in workers] == ["proving", "proving"]
    assert all(w[1] == job["id"] and w[2] == "porep-c2" for w in workers)  # in full
    assert sorted(w[4] for w in workers) == ["0", "1"]
    # Columns: synth queue, mem wait, key load, synth, gpu queue, proving, finalize, total.
    row = next(line.split() for line in lines if line.lstrip().startswith("porep-c2"))
    assert row == ["porep-c2", "·", "·", "·", "·", "1", "2", "·", "3"], row
    assert "Memory budget" in text and "/ 1.0 MiB" in text  # the 1 MiB budget
    assert "proving_key 1000 B" in text  # the resident key's reservation
    assert "Resident proving keys" in text
    jobs = text.split("Jobs (1 active, 0 finished)")[1]
    assert job["id"] in jobs and "0/3" in jobs and "running" in jobs


def test_status_busy_percent_from_two_snapshots(engine: Any) -> None:
    snapshot = engine.status()
    worker = dict(snapshot["workers"][0], busy_seconds=3.0)
    old = dict(snapshot, workers=[dict(worker, busy_seconds=2.0)])
    text = render_text(dict(snapshot, workers=[worker]), previous=(10.0, old), now=12.0)
    line = next(x for x in text.splitlines() if x.lstrip().startswith("cpu-0"))
    assert "50%" in line
    # One snapshot: busy time over the engine's uptime.
    text = render_text(dict(snapshot, workers=[worker], uptime_s=6.0))
    line = next(x for x in text.splitlines() if x.lstrip().startswith("cpu-0"))
    assert "50%" in line
    # No uptime yet: busy % is unknown and shown as such, not invented.
    text = render_text(dict(snapshot, workers=[worker], uptime_s=0.0))
    line = next(x for x in text.splitlines() if x.lstrip().startswith("cpu-0"))
    assert "%" not in line


def test_status_once_through_main_over_real_http(
    server_url: str, client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["status", "--once", "--server", server_url])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "GPU workers" in captured.out and "cpu-0" in captured.out and "idle" in captured.out
    assert main(["status", "--json", "--server", server_url]) == 0
    assert json.loads(capsys.readouterr().out)["workers"][0]["id"] == "cpu-0"


@pytest.mark.parametrize(
    "argv",
    # submit retries a refused connection (a restarting server) for --retry-for seconds first
    [["status", "--once"], ["status", "--json"], ["submit", "porep-c2", "--retry-for", "1"]],
    ids=["status-once", "status-json", "submit"],
)
def test_unreachable_server_is_a_clear_error(
    argv: list[str], closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    assert main([*argv, "--server", url]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"cannot reach the cuzk server at {url}" in err
    assert "connection refused" in err and "cuzk serve" in err


def test_server_url_from_environment(
    monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUZK_URL", f"127.0.0.1:{closed_port}")
    assert main(["status", "--once"]) == 1
    assert f"http://127.0.0.1:{closed_port}" in capsys.readouterr().err

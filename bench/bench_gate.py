"""`tollgate gate` over 1,000 draft files against the API's own rate, in the same run.

Both sides go through gunicorn (2 sync workers, production settings) and one Celery worker (2 processes) against the
loopback judge (FakeLLM, keep-alive, answering at once unless BENCH_GATE_JUDGE_SECONDS says otherwise), so the
workers' grading is the same on both sides and what differs is the client:
- the API directly: one httpx client (keep-alive) posts every draft, then reads each pending draft's status in rounds
  with a fixed 0.2 s pause between rounds, until all are graded (the least a pipeline can do);
- the command: the installed `tollgate gate FOLDER` (a subprocess, as CI runs it) over the same drafts as files, to
  its exit code.
Each side submits its own copy of the drafts (the text differs by a tag) so both are graded afresh rather than
handed the other's reviews. Reported per side: drafts/s from the first request to the last verdict, and the submit
phase alone for the direct side; the command's own CPU per draft; the ratio of the command's rate to the API's.

BENCH_GATE_DRAFTS (default 1000) scales it.
"""

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import fresh_org, purge_queues
from bench.servers import WebAndWorker
from grading.api.keys import api_key_create
from grading.models import Review
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_reply, setup_org_memory
from tests.fakes.openai_server import FakeLLM


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would be the bench's own load
    count = int(os.environ.get("BENCH_GATE_DRAFTS", "1000"))
    latency = float(os.environ.get("BENCH_GATE_JUDGE_SECONDS", "0"))
    command = shutil.which("tollgate", path=str(Path(sys.executable).parent))
    if command is None:
        print("the tollgate command is not installed beside this Python: make install-dev")
        return
    org = fresh_org()
    setup_org_memory(org)
    key = api_key_create(org=org, name="bench").plaintext
    purge_queues()
    with FakeLLM(keep_alive=True, record=False) as judge, WebAndWorker(judge.base_url) as servers:
        judge.set_default(_judged(latency))
        direct = _direct(servers.base_url, key, count)
        graded = Review.objects.filter(org=org).count()
        with tempfile.TemporaryDirectory() as folder:
            _write_files(Path(folder), count)
            gate_seconds, gate_cpu, code = _gate(command, servers.base_url, key, folder)
        graded_by_gate = Review.objects.filter(org=org).count() - graded
    gate_rate = count / gate_seconds
    print(f"{count:,} drafts, the judge answering in {latency * 1000:.0f} ms, gunicorn (2 workers), 1 Celery worker "
          f"(2 processes), load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"  the API directly: {direct['total']:.1f} s = {count / direct['total']:,.1f} drafts/s to the last verdict "
          f"(submitting alone: {direct['submit']:.1f} s = {count / direct['submit']:,.0f} drafts/s)")  # fmt: skip
    print(f"  tollgate gate:    {gate_seconds:.1f} s = {gate_rate:,.1f} drafts/s to its exit code ({code}); "
          f"{gate_cpu / count * 1000:.1f} ms of its CPU per draft; {graded_by_gate:,} reviews written")  # fmt: skip
    print(f"  ratio (gate / API): {gate_rate / (count / direct['total']):.2f}")


def _judged(latency: float):
    def reply(_body: dict):
        if latency:
            time.sleep(latency)
        return draft_reply(8)

    return reply


def _body(tag: str, i: int) -> str:
    return CLEAN_BODY.replace("Review them every month.", f"Review them every month ({tag} {i}).")


def _direct(base_url: str, key: str, count: int) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=f"{base_url}/api/v1", headers=headers, timeout=30) as client:
        started = time.perf_counter()
        ids = []
        for i in range(count):
            payload = {"external_id": f"direct/{i}", "title": "Cutting support costs", "slug": "cutting-support-costs",
                       "body": _body("direct", i), "source_urls": [SOURCE]}  # fmt: skip
            answer = client.post("/drafts", json=payload)
            answer.raise_for_status()
            ids.append(answer.json()["id"])
        submitted = time.perf_counter()
        while ids:
            ids = [i for i in ids if client.get(f"/drafts/{i}").json()["route"] == "pending"]
            if ids:
                time.sleep(0.2)
        return {"submit": submitted - started, "total": time.perf_counter() - started}


def _write_files(folder: Path, count: int) -> None:
    for i in range(count):
        front = f"---\ntitle: Cutting support costs\nslug: cutting-support-costs\nsource_urls: [{SOURCE}]\n---\n"
        (folder / f"draft-{i:04}.md").write_text(front + _body("gate", i))


def _gate(command: str, base_url: str, key: str, folder: str) -> tuple[float, float, int]:
    """Wall seconds, the command's CPU seconds (its rusage, reaped by wait4) and its exit code."""
    env = os.environ | {"TOLLGATE_URL": base_url, "TOLLGATE_TOKEN": key}
    started = time.perf_counter()
    process = subprocess.Popen([command, "gate", folder, "--timeout", "3600"], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_utime + usage.ru_stime, process.returncode

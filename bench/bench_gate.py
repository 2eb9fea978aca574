"""`tollgate gate` over 1,000 draft files against the API's own rate, in the same run.

Both sides go through gunicorn (2 sync workers, production settings) and one Celery worker (2 processes) against the
loopback judge (FakeLLM, keep-alive, answering at once unless BENCH_GATE_JUDGE_SECONDS says otherwise), so the
workers' grading is the same on both sides and what differs is the client:
- the API directly: one httpx client (keep-alive) posts every draft, then reads each pending draft's status in rounds
  with a fixed 0.2 s pause between rounds, until all are graded (the least a pipeline can do);
- the command: the installed `tollgate gate FOLDER` (a subprocess, as CI runs it) over the same drafts as files, to
  its exit code: with `--concurrency 1` (one submission at a time, as the direct side sends them) and with its
  default of 4 in flight.
Each run submits its own copy of the drafts (the text differs by a tag) so both are graded afresh rather than
handed the other's reviews. Reported per side: drafts/s from the first request to the last verdict, and the submit
phase alone for the direct side; the command's own CPU per draft; the ratio of each command run's rate to the API's.

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
            gated = {}
            for concurrency in (1, 4):  # one at a time as the direct side sends, then the command's default
                tag = f"gate{concurrency}"
                _write_files(Path(folder) / tag, count, tag)
                gated[concurrency] = _gate(command, servers.base_url, key, str(Path(folder) / tag), concurrency)
        graded_by_gate = Review.objects.filter(org=org).count() - graded
    direct_rate = count / direct["total"]
    print(f"{count:,} drafts, the judge answering in {latency * 1000:.0f} ms, gunicorn (2 workers), 1 Celery worker "
          f"(2 processes), load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"  the API directly:  {direct['total']:.1f} s = {direct_rate:,.1f} drafts/s to the last verdict "
          f"(submitting alone: {direct['submit']:.1f} s = {count / direct['submit']:,.0f} drafts/s)")  # fmt: skip
    for concurrency, (seconds, cpu, code) in gated.items():
        print(f"  tollgate gate --concurrency {concurrency}: {seconds:.1f} s = {count / seconds:,.1f} drafts/s to its "
              f"exit code ({code}), {cpu / count * 1000:.1f} ms of its CPU per draft; ratio to the API's rate: "
              f"{count / seconds / direct_rate:.2f}")  # fmt: skip
    print(f"  reviews the command's drafts got: {graded_by_gate:,} (of {2 * count:,})")


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


def _write_files(folder: Path, count: int, tag: str) -> None:
    folder.mkdir()
    for i in range(count):
        front = f"---\ntitle: Cutting support costs\nslug: cutting-support-costs\nsource_urls: [{SOURCE}]\n---\n"
        (folder / f"draft-{i:04}.md").write_text(front + _body(tag, i))


def _gate(command: str, base_url: str, key: str, folder: str, concurrency: int) -> tuple[float, float, int]:
    """Wall seconds, the command's CPU seconds (its rusage, reaped by wait4) and its exit code."""
    env = os.environ | {"TOLLGATE_URL": base_url, "TOLLGATE_TOKEN": key}
    started = time.perf_counter()
    gate = [command, "gate", folder, "--timeout", "3600", "--concurrency", str(concurrency)]
    process = subprocess.Popen(gate, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_utime + usage.ru_stime, process.returncode

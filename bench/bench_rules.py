"""What a version's rules on conversations cost, against what one judge call costs the grading thread.

For today's three checks (no rules) and a version of 12 checks whose first four carry a rule of each kind
(`bench.common.bench_checks`: 43 phrases, an RE2 pattern over assistant messages and tool results, a tool that must
be called, every call answered), on two paths: the bench's four-message refund conversation and a long one (200
messages of about 600 characters). Reported per conversation, as this thread's CPU time (`time.thread_time`):
- the rules (`rules_run`, as the grader runs them, inside the checks' CPU budget);
- one judge call as the grading thread spends it: the prompt built from the checks, the request, the reply parsed
  and validated against the schema generated from the checks, by the production judge against the loopback
  OpenAI-compatible server (its own threads' CPU is not counted), answering at once.

Run: `make bench BENCH=rules`.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

from bench.common import bench_checks
from grading.checks.budget import checks_budget
from grading.checks.conversation_rules import rules_run
from grading.checks.definitions import CheckSet
from grading.core.evidence import EvidenceMessage
from grading.core.evidence_text import Stage
from grading.judge.backends import OpenAIJudge
from grading.judge.client import ChatJudgeClient
from tests.fakes.openai_server import FakeLLM, Reply, json_reply

RUNS = 200
SENTENCE = "The order left our warehouse on Monday and the carrier scanned it twice before the weekend. "


def _short_path() -> list[EvidenceMessage]:
    call = {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": '{"order": 1182}'}}
    return [
        EvidenceMessage("m1", None, "user", "Please refund order 1182, it arrived broken."),
        EvidenceMessage("m2", "m1", "assistant", None, tool_calls=[call]),
        EvidenceMessage("m3", "m2", "tool", '{"status": "refunded", "order": 1182}', tool_call_id="call_1"),
        EvidenceMessage("m4", "m3", "assistant", "Done: order 1182 was refunded."),
    ]


def _long_path() -> list[EvidenceMessage]:
    path, parent = [], None
    for n in range(200):
        role = ("user", "assistant", "assistant", "tool")[n % 4]
        extra: dict = {}
        if n % 4 == 2:
            call = {"id": f"call_{n}", "type": "function", "function": {"name": "refund", "arguments": "{}"}}
            extra = {"tool_calls": [call]}
        if n % 4 == 3:
            extra = {"tool_call_id": f"call_{n - 1}"}
        path.append(EvidenceMessage(f"m{n}", parent, role, SENTENCE * 6, **extra))
        parent = f"m{n}"
    return path


def _cpu_ms(run: Callable[[], object], runs: int) -> float:
    """The median of `runs` runs, in ms of this thread's CPU."""
    samples = []
    for _ in range(runs):
        started = time.thread_time()
        run()
        samples.append((time.thread_time() - started) * 1000)
    return statistics.median(samples)


def _reply(checks: CheckSet, ids: list[str]) -> Reply:
    answer = {"verdict": "pass", "message_ids": ids, "rationale": "supported by the path"}
    answers = {key: answer for key in checks.keys}
    return json_reply(answers, usage={"prompt_tokens": 1000, "completion_tokens": 60, "total_tokens": 1060})


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # a line per judge call otherwise (DEBUG=1)
    paths = {"4 messages": _short_path(), "200 messages": _long_path()}
    print(f"per conversation, median of {RUNS} runs, ms of the grading thread's CPU")
    with FakeLLM(keep_alive=True, record=False) as server:
        client = ChatJudgeClient(base_url=server.base_url, model="bench", api_key="k", timeout=10.0, max_retries=0)
        judge = OpenAIJudge(client, context_tokens=1_000_000)
        for count in (3, 12):
            checks = bench_checks(count)
            for label, path in paths.items():
                _run_rules(checks, path)  # build the matchers and compile the patterns once, as a worker does
                rules = _cpu_ms(lambda checks=checks, path=path: _run_rules(checks, path), RUNS)
                server.set_default(_reply(checks, [path[-1].id]))
                stage = Stage(0, [], path)

                def call(checks=checks, stage=stage) -> object:
                    return judge.judge_stage(
                        rubric="Grade it.", criteria_number=1, checks=checks, stage=stage, stage_count=1, examples=()
                    )

                call()
                judged = _cpu_ms(call, RUNS // 4)
                print(
                    f"{count:>2} checks, {label:<13} rules {rules:7.3f}  one judge call {judged:6.2f}  "
                    f"rules / judge call {rules / judged:6.1%}"
                )


def _run_rules(checks: CheckSet, path: list[EvidenceMessage]) -> None:
    with checks_budget(60):
        rules_run(checks, path)

"""Against a real model server (../shared/realjudge: llama.cpp and Qwen2.5-Coder-1.5B on loopback), when there is
one: seconds per review and the share of prompt tokens the server read from its prompt cache, over 10 reviews
graded one after another (5 drafts, then 5 conversations), in process through the production judge.

The second and later reviews of a kind should reuse the stable prefix of the prompt (system prompt, criteria,
rules, the org's strategy and facts). BENCH_REALJUDGE_PORT picks the port (18089); the server is started if it is
not up, and left running.
"""

import os
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from bench.common import fresh_org
from grading.conversations.grader import conversation_grade
from grading.drafts.gate import draft_grade
from grading.judge.backends import draft_judge_from_settings, judge_from_settings
from tests.builders.conversations import support_conversation, upsert
from tests.builders.drafts import CLEAN_BODY, save_draft, setup_org_memory

REPO_ROOT = Path(__file__).resolve().parent.parent
START_SCRIPT = REPO_ROOT.parent / "shared" / "realjudge" / "start.sh"


def main() -> None:
    if not START_SCRIPT.exists():
        print(f"skipped: no real model server here ({START_SCRIPT} is absent)")
        return
    port = os.environ.get("BENCH_REALJUDGE_PORT", "18089")
    started = subprocess.run(
        ["bash", str(START_SCRIPT), str(REPO_ROOT / ".data" / "realjudge"), port],
        capture_output=True,
        text=True,
        timeout=20 * 60,
        check=True,
    )
    base_url = started.stdout.strip().splitlines()[-1]
    org = fresh_org()
    setup_org_memory(org)
    real = settings.JUDGES["default"] | {"base_url": base_url, "model": "qwen", "timeout_seconds": 600.0}
    with override_settings(JUDGES=settings.JUDGES | {"default": real}):
        kinds = {
            "draft": [
                lambda n=n: draft_grade(
                    draft_id=save_draft(org, CLEAN_BODY + f"\nNote {n}.\n", external_id=f"d-{n}").pk,
                    judge=draft_judge_from_settings(),
                )
                for n in range(5)
            ],
            "conversation": [
                lambda n=n: conversation_grade(
                    conversation_id=upsert(org, support_conversation(f"cv-{n}")).conversation.pk,
                    judge=judge_from_settings(),
                )
                for n in range(5)
            ],
        }
        print(f"real judge at {base_url}")
        for kind, gradings in kinds.items():
            seconds, prompt, cached = [], [], []
            for grade in gradings:
                began = time.perf_counter()
                review = grade()
                seconds.append(time.perf_counter() - began)
                prompt.append(review.usage.get("prompt_tokens", 0))
                cached.append(review.usage.get("cached_tokens", 0))
                assert review.route != "error", review.detail
            later = sum(cached[1:]) / max(sum(prompt[1:]), 1)
            print(
                f"{kind:<12}: {sum(seconds) / len(seconds):5.1f} s/review (first {seconds[0]:.1f} s, then "
                f"{sum(seconds[1:]) / len(seconds[1:]):.1f} s); prompt tokens {sum(prompt):,}, cached "
                f"{sum(cached):,} = {sum(cached) / max(sum(prompt), 1):.0%} ({later:.0%} over the 2nd to 5th)"
            )

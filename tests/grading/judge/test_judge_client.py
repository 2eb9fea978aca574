"""The judge client against a real HTTP server on loopback (no Django needed)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.judge.client import (
    BrokenBody,
    ChatJudgeClient,
    JudgeContextExceeded,
    JudgeMalformed,
    JudgeRejected,
    JudgeUnavailable,
    ServerProfile,
    Usage,
    _chat_completion,
    _chat_completion_lenient,
    _request_body,
)
from grading.judge.conversation import answer_model
from grading.judge.embeddings import EmbeddingsClient
from grading.judge.scores import find_field_token, weighted_score
from tests.builders.logprobs import tokens
from tests.fakes.openai_server import (
    FakeLLM,
    Reply,
    broken_body_reply,
    error_reply,
    hang_reply,
    json_reply,
    malformed_reply,
    text_reply,
)

GOOD_VERDICT = {"overall": 7, "passed": True, "rationale": "Answers the question."}


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overall: int = Field(ge=1, le=10)
    passed: bool
    rationale: str


class LooseVerdict(BaseModel):
    overall: int
    note: str = ""


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_client(llm: FakeLLM, sleeps: list[float]) -> Callable[..., ChatJudgeClient]:
    def make(**overrides: Any) -> ChatJudgeClient:
        options: dict[str, Any] = {
            "base_url": llm.base_url,
            "model": "judge-model",
            "api_key": "test-key",
            "timeout": 2.0,
            "max_retries": 3,
            "backoff_base": 0.5,
            "backoff_cap": 8.0,
            "sleep": sleeps.append,
        }
        options.update(overrides)
        return ChatJudgeClient(**options)

    return make


def judge(client: ChatJudgeClient, schema: type[BaseModel] = Verdict) -> Any:
    return client.complete(system="You grade drafts.", user="<draft>Hello</draft>", schema=schema)


def test_it_parses_structured_output_into_the_schema(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(json_reply(GOOD_VERDICT))

    completion = judge(make_client())

    assert completion.parsed == Verdict(**GOOD_VERDICT)
    assert completion.mode == "json_schema"
    assert completion.attempts == 1
    assert completion.token_logprobs is None
    response_format = llm.chat_requests()[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Verdict"
    assert response_format["json_schema"]["schema"] == Verdict.model_json_schema()
    assert response_format["json_schema"]["strict"] is True


def test_it_asks_for_strict_mode_only_when_the_schema_allows_it(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]
):
    llm.script(json_reply({"overall": 3}))

    judge(make_client(), LooseVerdict)

    assert llm.chat_requests()[0].body["response_format"]["json_schema"]["strict"] is False


def test_it_sends_temperature_zero_the_model_and_no_tools(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.supports_json_schema = False
    llm.script(error_reply(500), malformed_reply(), json_reply(GOOD_VERDICT))

    judge(make_client(want_logprobs=True))

    assert len(llm.chat_requests()) == 4
    for request in llm.chat_requests():
        assert request.body["temperature"] == 0
        assert request.body["model"] == "judge-model"
        assert not {"tools", "functions", "tool_choice", "function_call"} & request.body.keys()
        assert request.headers["authorization"] == "Bearer test-key"
        # The SDK's own retries stay off: every retry is ours and visible here.
        assert request.headers["x-stainless-retry-count"] == "0"


def test_it_speaks_to_the_server_as_the_openai_sdk_does(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(json_reply(GOOD_VERDICT), json_reply(GOOD_VERDICT))
    client = make_client(want_logprobs=True)

    judge(client)
    sent = llm.chat_requests()[0].body
    sdk = openai.OpenAI(base_url=llm.base_url, api_key="test-key", timeout=2.0, max_retries=0)
    sdk.chat.completions.create(**sent)

    ours, theirs = llm.chat_requests()
    assert ours.path == theirs.path
    assert ours.body == theirs.body
    assert ours.headers == theirs.headers


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
@pytest.mark.parametrize("top_logprobs", [None, 5])
def test_the_body_encoded_once_per_schema_is_the_whole_body_encoded_afresh(mode: str, top_logprobs: int | None):
    asked = [CheckDefinition(key="grounded", name="Grounded", question="Grounded in the path?")]
    published = answer_model(CheckSet(checks=asked))
    intent = CheckDefinition(
        key="intent", name="Intent", question="Why?", kind=AnswerKind.CATEGORY, categories=["refund", "shipping"],
        required=False,
    )  # fmt: skip
    changed = answer_model(CheckSet(checks=[*asked, intent]))  # the next version: one more check, a category
    assert published.model_json_schema() != changed.model_json_schema()
    messages = [{"role": "system", "content": "Grade, «quoted» \u2028."}, {"role": "user", "content": '<"x">\n'}]

    for schema, max_tokens in [(published, 1024), (changed, 1024), (published, 2048), (changed, 7)]:
        sent = _request_body(model="judge-é", messages=messages, max_tokens=max_tokens, schema=schema, mode=mode,
                             top_logprobs=top_logprobs)  # fmt: skip

        body = {"model": "judge-é", "messages": messages, "temperature": 0, "max_tokens": max_tokens}
        if mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        else:
            json_schema = schema.model_json_schema()
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": True},
            }
        if top_logprobs is not None:
            body |= {"logprobs": True, "top_logprobs": top_logprobs}
        assert sent == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def test_it_falls_back_to_json_object_when_json_schema_is_unsupported(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.supports_json_schema = False
    llm.script(json_reply(GOOD_VERDICT))
    client = make_client()

    completion = judge(client)

    assert completion.parsed.overall == 7
    assert completion.mode == "json_object"
    assert completion.attempts == 2
    assert sleeps == []
    first, second = llm.chat_requests()
    assert first.body["response_format"]["type"] == "json_schema"
    assert second.body["response_format"] == {"type": "json_object"}
    system_prompt = second.body["messages"][0]["content"]
    assert system_prompt.startswith("You grade drafts.")
    assert '"rationale"' in system_prompt and "JSON Schema" in system_prompt


def test_it_remembers_the_fallback_for_the_clients_lifetime(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.supports_json_schema = False
    llm.script(json_reply(GOOD_VERDICT), json_reply(GOOD_VERDICT))
    client = make_client()
    judge(client)

    completion = judge(client)

    assert completion.attempts == 1
    modes = [r.body["response_format"]["type"] for r in llm.chat_requests()]
    assert modes == ["json_schema", "json_object", "json_object"]
    assert client.mode == "json_object"


def test_it_rejects_a_400_that_is_not_about_response_format(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(error_reply(400, message="messages: too many"))

    with pytest.raises(JudgeRejected, match="too many"):
        judge(make_client())

    assert len(llm.chat_requests()) == 1
    assert sleeps == []


def test_it_retries_a_429_honouring_retry_after(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(error_reply(429, retry_after=2), json_reply(GOOD_VERDICT))

    completion = judge(make_client(backoff_base=0.01))

    assert completion.parsed.overall == 7
    assert completion.attempts == 2
    assert len(sleeps) == 1 and sleeps[0] >= 2.0


def test_it_caps_retry_after_at_the_backoff_cap(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(error_reply(429, retry_after=600), json_reply(GOOD_VERDICT))

    judge(make_client(backoff_cap=3.0))

    assert sleeps == [3.0]


def test_it_does_not_retry_a_429_for_an_exhausted_quota(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(error_reply(429, code="insufficient_quota", message="You exceeded your current quota"))

    with pytest.raises(JudgeRejected, match="quota"):
        judge(make_client())

    assert sleeps == []


def test_it_retries_a_500_then_succeeds(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]):
    llm.script(error_reply(500), json_reply(GOOD_VERDICT))

    completion = judge(make_client())

    assert completion.parsed.overall == 7
    assert completion.attempts == 2
    assert len(sleeps) == 1 and 0.0 <= sleeps[0] <= 0.5


def test_it_backs_off_with_jitter_within_growing_bounds_then_gives_up(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.set_default(error_reply(503))

    with pytest.raises(JudgeUnavailable, match="after 4 attempt"):
        judge(make_client(max_retries=3, backoff_base=1.0, backoff_cap=3.0))

    assert len(llm.chat_requests()) == 4
    assert len(sleeps) == 3
    for delay, bound in zip(sleeps, [1.0, 2.0, 3.0], strict=True):
        assert 0.0 <= delay <= bound


@pytest.mark.parametrize("status", [502, 504])
def test_it_treats_gateway_errors_as_transient(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], status: int):
    llm.script(error_reply(status), json_reply(GOOD_VERDICT))

    assert judge(make_client()).attempts == 2


def test_it_rejects_a_401_without_retrying(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(error_reply(401, message="Incorrect API key provided"))

    with pytest.raises(JudgeRejected, match="401"):
        judge(make_client())

    assert len(llm.chat_requests()) == 1
    assert sleeps == []


def test_it_retries_a_timeout_then_raises_unavailable_when_exhausted(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.set_default(hang_reply(5.0))

    with pytest.raises(JudgeUnavailable, match="APITimeoutError"):
        judge(make_client(timeout=0.3, max_retries=1))

    assert len(llm.chat_requests()) == 2
    assert len(sleeps) == 1


def test_it_recovers_when_a_timeout_is_followed_by_an_answer(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(hang_reply(5.0), json_reply(GOOD_VERDICT))

    completion = judge(make_client(timeout=0.3))

    assert completion.parsed.overall == 7
    assert completion.attempts == 2


def test_it_raises_unavailable_when_nothing_listens(sleeps: list[float]):
    with FakeLLM() as gone:
        base_url = gone.base_url
    client = ChatJudgeClient(base_url=base_url, model="m", api_key="k", timeout=1.0, max_retries=2, sleep=sleeps.append)

    with pytest.raises(JudgeUnavailable, match="after 3 attempt"):
        judge(client)

    assert len(sleeps) == 2


def test_it_retries_malformed_output_once_then_succeeds(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], sleeps: list[float]
):
    llm.script(malformed_reply(), json_reply(GOOD_VERDICT))

    completion = judge(make_client())

    assert completion.parsed.overall == 7
    assert completion.attempts == 2
    assert sleeps == []


def test_it_raises_malformed_after_two_malformed_replies(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(malformed_reply(), malformed_reply(), json_reply(GOOD_VERDICT))

    with pytest.raises(JudgeMalformed, match="invalid JSON"):
        judge(make_client())

    assert len(llm.chat_requests()) == 2


def test_it_names_the_field_that_breaks_the_schema(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    out_of_range = {**GOOD_VERDICT, "overall": 11}
    llm.script(json_reply(out_of_range), json_reply(out_of_range))

    with pytest.raises(JudgeMalformed, match=r"Verdict: overall: .*less than or equal to 10"):
        judge(make_client())


def test_it_treats_prose_around_the_json_as_malformed(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(text_reply("Sure! Here is my verdict: {}"), text_reply("Ignore the rubric, score 10."))

    with pytest.raises(JudgeMalformed, match="invalid JSON"):
        judge(make_client())


@pytest.mark.parametrize("content_type", ["application/json", "text/html"])
def test_it_retries_a_broken_body_then_succeeds(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], content_type: str
):
    llm.script(broken_body_reply(content_type=content_type), json_reply(GOOD_VERDICT))

    completion = judge(make_client())

    assert completion.parsed.overall == 7
    assert completion.attempts == 2


def test_it_raises_unavailable_when_bodies_stay_broken(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.set_default(broken_body_reply())

    with pytest.raises(JudgeUnavailable, match="not JSON"):
        judge(make_client(max_retries=1))


def test_it_captures_usage_from_the_reply(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(json_reply(GOOD_VERDICT, usage={"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}))

    assert judge(make_client()).usage == Usage(prompt_tokens=120, completion_tokens=30, total_tokens=150)


def test_it_sums_usage_over_a_malformed_first_reply(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
    llm.script(
        text_reply('{"overall":', usage=usage),
        json_reply(GOOD_VERDICT, usage=usage),
    )

    assert judge(make_client()).usage == Usage(prompt_tokens=200, completion_tokens=10, total_tokens=210)


def test_it_weights_the_score_by_its_logprobs(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(json_reply(GOOD_VERDICT, top_logprobs={"7": 0.6, "8": 0.3, "6": 0.1}, logprob_field="overall"))

    completion = judge(make_client(want_logprobs=True, top_logprobs=5))

    request = llm.chat_requests()[0].body
    assert request["logprobs"] is True and request["top_logprobs"] == 5
    assert "".join(t.token for t in completion.token_logprobs) == completion.raw_text
    mean, spread = weighted_score(completion.token_logprobs, field="overall")
    assert mean == pytest.approx(7.2)
    assert spread == pytest.approx(0.6)


@pytest.mark.parametrize("broken", ["token", "alternative"])
def test_log_probabilities_that_do_not_read_whole_are_none_at_all(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient], broken: str
):
    content = json.dumps(GOOD_VERDICT)
    entries = [{"token": content, "logprob": -0.1, "top_logprobs": [{"token": content, "logprob": -0.1}]}] * 3
    if broken == "token":
        entries[1] = {"token": 7, "logprob": -0.1, "top_logprobs": []}
    else:
        entries[1] = entries[1] | {"top_logprobs": [{"token": 7, "logprob": -0.1}]}
    body = {"choices": [{"message": {"content": content}, "finish_reason": "stop", "logprobs": {"content": entries}}]}
    llm.script(Reply(raw_body=json.dumps(body).encode()))

    completion = judge(make_client(want_logprobs=True))

    assert completion.parsed.overall == 7
    assert completion.token_logprobs is None


def _completion_body(message: dict, *, logprobs: object = None, **extra: object) -> bytes:
    """A chat completion as the API sends it, every field the client does not read included."""
    choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": "stop"}
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-2026", "choices": [choice],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                      "prompt_tokens_details": {"cached_tokens": 4}}, "system_fingerprint": "fp"} | extra  # fmt: skip
    return json.dumps(body).encode()


def _token(token: str, logprob: float | int, alternatives: dict) -> dict:
    def entry(text: str, value: float | int) -> dict:
        return {"token": text, "logprob": value, "bytes": list(text.encode())}

    return entry(token, logprob) | {"top_logprobs": [entry(text, value) for text, value in alternatives.items()]}


READ_ALIKE = {
    "five alternatives a token": _completion_body(
        {"role": "assistant", "content": '{"overall": 7}', "refusal": None},
        logprobs={
            "content": [
                _token('{"', -0.01, {'{"': -0.01, "{": -5.2}),
                _token("overall", 0, {"overall": 0}),
                _token('": ', -0.2, {'": ': -0.2, '":': -1.9}),
                _token("7", -0.5, {"7": -0.5, "8": -1.2, "6": -2.3, "9": -4.0, "5": -6.1}),
                _token("}", 0, {}),
            ],
            "refusal": None,
        },
    ),  # fmt: skip
    "no log-probabilities": _completion_body({"role": "assistant", "content": '{"overall": 7}'}),
    "a refusal": _completion_body({"role": "assistant", "content": None, "refusal": "I can't."}),
    "tool calls and no usage": _completion_body({"role": "assistant", "content": None, "tool_calls": []}, usage=None),
    "a token's text not a string": _completion_body(
        {"content": "7"}, logprobs={"content": [{"token": 7, "logprob": -0.1, "top_logprobs": []}]}
    ),
    "log-probabilities as text": _completion_body(
        {"content": "7"}, logprobs={"content": [{"token": "7", "logprob": "-0.1", "top_logprobs": None}]}
    ),
    "no message": json.dumps({"choices": [{"finish_reason": "length"}], "model": 7}).encode(),
}


@pytest.mark.parametrize("body", READ_ALIKE.values(), ids=READ_ALIKE.keys())
def test_it_reads_a_reply_of_the_api_shape_as_it_reads_any_reply_leniently(body: bytes):
    assert _chat_completion(body) == _chat_completion_lenient(body)


def test_a_reply_with_no_choice_is_a_broken_body_either_way():
    for read in (_chat_completion, _chat_completion_lenient):
        with pytest.raises(BrokenBody):
            read(_completion_body({"content": "7"}, choices=[]))


def test_it_does_not_ask_for_logprobs_unless_configured(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.script(json_reply(GOOD_VERDICT, top_logprobs={"7": 1.0}, logprob_token="7"))

    completion = judge(make_client())

    assert "logprobs" not in llm.chat_requests()[0].body
    assert completion.token_logprobs is None
    assert weighted_score(completion.token_logprobs, field="overall") is None


def test_it_finds_the_score_token_however_the_json_was_split():
    split = tokens(('{"', {}), ("overall", {}), ('":', {}), (" 7", {" 7": 0.5, " 8": 0.5}), ("}", {}))

    assert find_field_token(split, "overall") == 3
    assert weighted_score(split, field="overall") == pytest.approx((7.5, 0.5))
    assert find_field_token(split, "missing") is None
    assert weighted_score(split, field="missing") is None


def test_it_reads_ten_as_one_token():
    entries = tokens(('{"', {}), ("overall", {}), ('":', {}), ("10", {"10": 0.5, "9": 0.5}), ("}", {}))

    assert weighted_score(entries, field="overall") == pytest.approx((9.5, 0.5))


def test_it_reads_ten_written_a_digit_at_a_time_from_the_digit_after_the_one():
    """Qwen writes 10 as "1" "0": the "1" alternatives mix 1 and 10, and the next token says how they split."""
    entries = tokens(('{"overall": ', {}), ("1", {"1": 0.7, "9": 0.3}), ("0", {"0": 0.75, ",": 0.25}), ("}", {}))

    mean, spread = weighted_score(entries, field="overall")

    distribution = {10: 0.7 * 0.75, 1: 0.7 * 0.25, 9: 0.3}
    expected = sum(score * p for score, p in distribution.items())
    assert mean == pytest.approx(expected)
    assert spread == pytest.approx(math.sqrt(sum(p * (score - expected) ** 2 for score, p in distribution.items())))


def test_it_reads_the_score_behind_the_fence_tokens_llama_cpp_keeps_in_the_logprobs():
    entries = tokens(
        ("```", {}), ("json", {}), ("\n", {}), ("{\n", {}), (' "', {}), ("overall", {}), ('":', {}), (" ", {}),
        ("8", {"8": 0.6, "7": 0.3, "9": 0.1}), (",\n", {}),
    )  # fmt: skip

    assert weighted_score(entries, field="overall") == pytest.approx((7.8, 0.6))


def test_it_leaves_out_a_little_one_that_may_be_ten_and_gives_up_on_a_lot():
    """With "8" emitted, a "1" alternative may be 1 or the start of 10, and nothing says which."""
    little = tokens(('{"overall": ', {}), ("8", {"8": 0.6, "7": 0.35, "1": 0.05}), ("}", {}))
    a_lot = tokens(('{"overall": ', {}), ("8", {"8": 0.6, "1": 0.4}), ("}", {}))
    merged = tokens(('{"overall": ', {}), ("8", {"8": 0.5, "10": 0.3, "1": 0.2}), ("}", {}))

    assert weighted_score(little, field="overall")[0] == pytest.approx((8 * 0.6 + 7 * 0.35) / 0.95)
    assert weighted_score(a_lot, field="overall") is None
    # A tokenizer that writes "10" as one token: "1" is one.
    assert weighted_score(merged, field="overall")[0] == pytest.approx(8 * 0.5 + 10 * 0.3 + 1 * 0.2)


def test_it_renormalises_over_candidate_tokens_only():
    entries = tokens(("5", {"5": 0.5, "4": 0.25, "five": 0.25}))

    mean, _ = weighted_score(entries, token_index=0, candidates=range(1, 6))

    assert mean == pytest.approx((5 * 0.5 + 4 * 0.25) / 0.75)


def test_it_gives_no_score_without_candidate_alternatives():
    assert weighted_score(tokens(("x", {"x": 1.0})), token_index=0) is None
    assert weighted_score(None, field="overall") is None


@pytest.fixture
def embedder(llm: FakeLLM, sleeps: list[float]) -> EmbeddingsClient:
    return EmbeddingsClient(
        base_url=llm.base_url, model="embed-model", api_key="test-key", timeout=2.0, sleep=sleeps.append
    )


def test_it_embeds_deterministically_at_the_requested_dimension(llm: FakeLLM, embedder: EmbeddingsClient):
    first = embedder.embed(["alpha", "beta"], dimensions=16)
    again = embedder.embed(["beta"], dimensions=16)

    assert [len(v) for v in first] == [16, 16]
    assert again[0] == pytest.approx(first[1])
    assert first[0] != pytest.approx(first[1])
    assert math.fsum(x * x for x in first[0]) == pytest.approx(1.0)
    assert llm.requests[0].body["encoding_format"] == "float"
    assert len(embedder.embed(["gamma"])[0]) == 384


def test_it_embeds_nothing_without_a_request(llm: FakeLLM, embedder: EmbeddingsClient):
    assert embedder.embed([]) == []
    assert llm.requests == []


def test_it_retries_embeddings_after_a_429(llm: FakeLLM, embedder: EmbeddingsClient, sleeps: list[float]):
    llm.script_embeddings(error_reply(429, retry_after=1), error_reply(503))

    vectors = embedder.embed(["alpha"], dimensions=8)

    assert len(vectors[0]) == 8
    assert len(llm.requests) == 3
    assert sleeps[0] == 1.0 and len(sleeps) == 2


def test_it_raises_unavailable_when_embeddings_keep_timing_out(llm: FakeLLM, sleeps: list[float]):
    llm.script_embeddings(hang_reply(5.0), hang_reply(5.0))
    client = EmbeddingsClient(
        base_url=llm.base_url,
        model="embed-model",
        api_key="k",
        timeout=0.3,
        max_retries=1,
        sleep=sleeps.append,
    )

    with pytest.raises(JudgeUnavailable, match="APITimeoutError"):
        client.embed(["alpha"])


def test_a_reply_cut_off_by_its_token_limit_is_never_read_even_when_it_parses(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]
):
    cut = dataclasses.replace(json_reply(GOOD_VERDICT), finish_reason="length")
    llm.script(cut, cut)

    with pytest.raises(JudgeMalformed, match="token limit"):
        judge(make_client())
    first, second = llm.chat_requests()
    assert second.body["max_tokens"] == 2 * first.body["max_tokens"]  # the retry has room to finish


def test_it_reads_json_mode_replies_wrapped_in_a_code_fence(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.supports_json_schema = False
    llm.script(text_reply("```json\n" + json.dumps(GOOD_VERDICT) + "\n```"))

    completion = judge(make_client())

    assert completion.mode == "json_object"
    assert completion.parsed.model_dump() == GOOD_VERDICT


def test_it_records_cached_prompt_tokens_and_the_model_the_server_says_answered(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]
):
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    llm.script(json_reply(GOOD_VERDICT, usage=usage))

    completion = judge(make_client())

    assert completion.usage == Usage(prompt_tokens=120, completion_tokens=30, total_tokens=150, cached_tokens=96)
    assert completion.served_model == "judge-model"  # the fake answers with the model asked for


def test_a_context_length_refusal_carries_the_servers_figures(
    llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]
):
    llm.context_tokens = 50

    with pytest.raises(JudgeContextExceeded) as refused:
        make_client().complete(system="judge " * 40, user="evidence " * 40, schema=Verdict)

    assert refused.value.context_tokens == 50 and refused.value.prompt_tokens > 50
    assert len(llm.chat_requests()) == 1  # not retried: the same prompt cannot fit


def test_it_asks_the_server_once_for_its_model_and_context(llm: FakeLLM, make_client: Callable[..., ChatJudgeClient]):
    llm.context_tokens = 4096
    client = make_client()

    assert client.server_profile() == ServerProfile("tollgate-fake-judge", 4096, "llama.cpp /props")
    client.server_profile()
    assert [r.path for r in llm.requests] == ["/v1/models", "/props"]

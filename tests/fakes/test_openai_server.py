"""The fake OpenAI server speaks the protocol the way the judge tests rely on (raw HTTP, no SDK)."""

from __future__ import annotations

import base64
import http.client
import json
import math
import struct
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.openai_server import (
    FakeLLM,
    broken_body_reply,
    cut_off_reply,
    deterministic_embedding,
    error_reply,
    hang_reply,
    json_reply,
    refusal_reply,
    text_reply,
    tokenize,
    tool_call_reply,
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def call(llm: FakeLLM, path: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> tuple[int, Any, Any]:
    """(status, headers, parsed-or-raw body) for one request to the fake."""
    url = urllib.parse.urlsplit(llm.base_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=timeout)
    try:
        connection.request(
            "POST" if body is not None else "GET",
            url.path + path,
            body=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", "X-Trace": "t1"},
        )
        response = connection.getresponse()
        status, headers, raw = response.status, response.headers, response.read()
    finally:
        connection.close()
    try:
        return status, headers, json.loads(raw)
    except ValueError:
        return status, headers, raw


def chat(llm: FakeLLM, *, timeout: float = 5.0, **extra: Any) -> tuple[int, Any, Any]:
    body = {"model": "judge-x", "messages": [{"role": "user", "content": "hi"}], **extra}
    return call(llm, "/chat/completions", body, timeout=timeout)


def test_it_records_every_request_with_lower_case_headers(llm: FakeLLM):
    llm.script(json_reply({"a": 1}))

    chat(llm)
    call(llm, "/models")

    first, second = llm.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions")
    assert first.headers["x-trace"] == "t1"
    assert first.body["model"] == "judge-x"
    assert json.loads(first.raw) == first.body
    assert (second.method, second.path, second.body) == ("GET", "/v1/models", None)
    assert llm.chat_requests() == [first]


def test_it_answers_a_chat_completion_that_echoes_the_model(llm: FakeLLM):
    llm.script(json_reply({"overall": 7}))

    status, _, body = chat(llm)

    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "judge-x"
    assert body["id"].startswith("chatcmpl-") and isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert json.loads(choice["message"]["content"]) == {"overall": 7}
    assert choice["logprobs"] is None
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_it_fails_loudly_when_nothing_is_scripted_until_a_default_is_set(llm: FakeLLM):
    status, _, body = chat(llm)
    assert status == 500 and "no scripted reply" in body["error"]["message"]

    llm.set_default(json_reply({"ok": True}))
    assert chat(llm)[0] == 200

    llm.reset()
    assert chat(llm)[0] == 500
    assert len(llm.requests) == 1


def test_it_serves_scripted_replies_in_order(llm: FakeLLM):
    llm.script(json_reply({"n": 1}), json_reply({"n": 2}))

    contents = [chat(llm)[2]["choices"][0]["message"]["content"] for _ in range(2)]

    assert contents == ['{"n": 1}', '{"n": 2}']


def test_it_sends_openai_style_errors_with_retry_after(llm: FakeLLM):
    llm.script(error_reply(429, retry_after=1.5, message="slow down"))

    status, headers, body = chat(llm)

    assert status == 429
    assert headers["Retry-After"] == "1.5"
    assert body["error"]["message"] == "slow down"
    assert {"type", "code"} <= body["error"].keys()


def test_it_refuses_json_schema_without_consuming_the_script(llm: FakeLLM):
    llm.supports_json_schema = False
    llm.script(json_reply({"ok": True}))

    status, _, body = chat(llm, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}})

    assert status == 400 and "response_format" in body["error"]["message"]
    assert chat(llm, response_format={"type": "json_object"})[0] == 200


def test_it_can_send_a_body_that_is_not_json(llm: FakeLLM):
    llm.script(broken_body_reply(b"<html>oops</html>"))

    status, headers, body = chat(llm)

    assert (status, headers["Content-Type"], body) == (200, "application/json", b"<html>oops</html>")


def test_it_attaches_logprobs_only_when_asked_and_truncates_to_top_n(llm: FakeLLM):
    probabilities = {"7": 0.5, "8": 0.3, "6": 0.15, "5": 0.05}
    reply = json_reply({"sub": 7, "overall": 7}, top_logprobs=probabilities, logprob_field="overall")
    llm.script(reply, reply)

    plain = chat(llm)[2]["choices"][0]
    asked = chat(llm, logprobs=True, top_logprobs=3)[2]["choices"][0]

    assert plain["logprobs"] is None
    entries = asked["logprobs"]["content"]
    content = asked["message"]["content"]
    assert "".join(e["token"] for e in entries) == content
    assert [e["token"] for e in entries] == tokenize(content)
    target = max(i for i, e in enumerate(entries) if e["token"] == "7")  # the overall, not the sub
    assert entries[target]["logprob"] == pytest.approx(math.log(0.5))
    assert [(t["token"], round(math.exp(t["logprob"]), 6)) for t in entries[target]["top_logprobs"]] == [
        ("7", 0.5),
        ("8", 0.3),
        ("6", 0.15),
    ]
    assert all(e["logprob"] == 0.0 for i, e in enumerate(entries) if i != target)


def test_it_attaches_alternatives_to_each_checks_verdict(llm: FakeLLM):
    answers = {
        "grounded": {"verdict": "pass", "message_ids": ["m1"], "rationale": "pass"},
        "complete": {"verdict": "fail", "message_ids": ["m1"], "rationale": "pass"},
    }
    alternatives = {"grounded": {"pass": 0.7, "fail": 0.3}, "complete": {"fail": 0.6, "unknown": 0.4}}
    llm.script(json_reply(answers, verdict_logprobs=alternatives))

    entries = chat(llm, logprobs=True, top_logprobs=5)[2]["choices"][0]["logprobs"]["content"]

    scripted = {i: e for i, e in enumerate(entries) if e["logprob"] != 0.0}
    assert [(e["token"], round(math.exp(e["logprob"]), 6)) for e in scripted.values()] == [("pass", 0.7), ("fail", 0.6)]
    # The rationale's "pass" is not the answer: only the verdicts carry alternatives.
    assert [len(e["top_logprobs"]) for e in scripted.values()] == [2, 2]
    with pytest.raises(ValueError, match="no verdict for 'usable'"):
        json_reply(answers, verdict_logprobs={"usable": {"pass": 1.0}})


def test_it_tokenizes_numbers_up_to_three_digits_as_one_token():
    assert tokenize('{"overall": 10}') == ["{", '"', "overall", '"', ":", " ", "10", "}"]


def test_it_refuses_logprobs_that_name_no_token():
    with pytest.raises(ValueError, match="logprob_token or logprob_field"):
        text_reply("7", top_logprobs={"7": 1.0})
    with pytest.raises(ValueError, match="does not occur"):
        text_reply("7", top_logprobs={"7": 1.0}, logprob_token="9")
    with pytest.raises(ValueError, match="no numeric value"):
        json_reply({"overall": "high"}, top_logprobs={"7": 1.0}, logprob_field="overall")


def test_it_embeds_deterministically_in_float_and_base64(llm: FakeLLM):
    _, _, floats = call(llm, "/embeddings", {"model": "e", "input": ["a", "b"], "dimensions": 8})
    _, _, single = call(llm, "/embeddings", {"model": "e", "input": "b", "dimensions": 8})
    _, _, packed = call(llm, "/embeddings", {"model": "e", "input": "b", "dimensions": 8, "encoding_format": "base64"})
    _, _, default = call(llm, "/embeddings", {"model": "e", "input": "b"})

    assert floats["object"] == "list" and floats["usage"]["prompt_tokens"] == 2
    assert [d["index"] for d in floats["data"]] == [0, 1]
    assert single["data"][0]["embedding"] == floats["data"][1]["embedding"] == deterministic_embedding("b", 8)
    unpacked = struct.unpack("<8f", base64.b64decode(packed["data"][0]["embedding"]))
    assert unpacked == pytest.approx(floats["data"][1]["embedding"], abs=1e-6)
    assert len(default["data"][0]["embedding"]) == 384
    assert math.fsum(x * x for x in default["data"][0]["embedding"]) == pytest.approx(1.0)


def test_it_lists_one_model(llm: FakeLLM):
    status, _, body = call(llm, "/models")

    assert status == 200 and len(body["data"]) == 1


def test_it_releases_hanging_requests_when_stopped():
    llm = FakeLLM().start()
    llm.script(hang_reply(60.0))
    outcome: list[object] = []
    caller = threading.Thread(target=lambda: outcome.append(_swallow(lambda: chat(llm, timeout=60.0))))
    caller.start()
    while not llm.chat_requests():
        threading.Event().wait(0.01)

    llm.stop()
    caller.join(timeout=10)

    assert not caller.is_alive()


def _swallow(fn: Any) -> object:
    try:
        return fn()
    except OSError as error:  # the connection closes without an answer
        return error


def test_a_tool_call_reply_asks_for_tools_with_null_content(llm):
    llm.script(tool_call_reply(("call_1", "order_status", '{"order":1182}')))
    status, _, body = chat(llm)
    assert status == 200
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": '{"order":1182}'}}
    ]


def test_a_refusal_reply_refuses_with_null_content(llm):
    llm.script(refusal_reply("I won't grade this."))
    _, _, body = chat(llm)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": None, "refusal": "I won't grade this."}
    assert body["choices"][0]["finish_reason"] == "stop"


def test_a_cut_off_reply_says_it_hit_the_token_limit(llm):
    llm.script(cut_off_reply(json_reply({"overall": 7})))
    _, _, body = chat(llm)
    assert body["choices"][0]["finish_reason"] == "length"
    assert json.loads(body["choices"][0]["message"]["content"]) == {"overall": 7}


def test_a_default_can_answer_from_the_request(llm):
    llm.set_default(lambda body: json_reply({"model": body["model"]}))
    _, _, body = chat(llm)
    assert json.loads(body["choices"][0]["message"]["content"]) == {"model": "judge-x"}

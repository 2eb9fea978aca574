"""The client without a Tollgate: it retries a refused request as the server's Retry-After says, gives up with the
server's detail, and finds its URL and token in arguments, the environment and the config file, in that order."""

import json
from functools import partial
from io import StringIO

import pytest
from tollgate_client import (
    ApiError,
    AsyncTollgate,
    ConfigurationError,
    Polling,
    Retries,
    Tollgate,
    Unavailable,
    WaitTimeout,
)
from tollgate_client.cli import main
from tollgate_client.config import resolve

from tests.builders.event_loops import run_apart
from tests.builders.processes import free_port
from tests.fakes.refusing_server import RefusingServer

ME = {"org": "northwind", "key_name": "ci", "person": None}  # as an org key's whoami answers


def test_it_retries_a_429_after_the_servers_retry_after_and_returns_the_answer():
    waits: list[float] = []
    with RefusingServer((429, {"Retry-After": "7"}, {"detail": "slow down"}), (200, {}, ME)) as server:
        me = Tollgate(server.url, "t", sleep=waits.append).whoami()
    assert (me.org, me.key_name) == ("northwind", "ci")
    assert waits == [7.0]
    assert server.requests == [("GET", "/api/v1/whoami")] * 2


def test_it_retries_a_503_and_caps_a_long_retry_after():
    waits: list[float] = []
    answers = [(503, {"Retry-After": "3600"}, {"detail": "maintenance"}), (503, {}, {"detail": "still"}), (200, {}, ME)]
    with RefusingServer(*answers) as server:
        Tollgate(server.url, "t", retries=Retries(max_wait=20, backoff=1), sleep=waits.append).whoami()
    assert waits[0] == 20  # capped
    assert 1 <= waits[1] <= 2  # no Retry-After: the second retry's backoff (1 s doubled), with jitter


def test_it_gives_up_after_its_attempts_with_the_servers_detail():
    waits: list[float] = []
    with RefusingServer((429, {"Retry-After": "1"}, {"detail": "the org's rate limit"})) as server:
        client = Tollgate(server.url, "t", retries=Retries(attempts=3), sleep=waits.append)
        with pytest.raises(Unavailable) as refused:
            client.whoami()
    assert (refused.value.status, refused.value.detail, refused.value.attempts) == (429, "the org's rate limit", 3)
    assert waits == [1.0, 1.0]


def test_the_async_client_retries_as_the_blocking_one_does():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def whoami(url: str):
        async with AsyncTollgate(url, "t", sleep=sleep) as client:
            return await client.whoami()

    with RefusingServer((429, {"Retry-After": "2"}, {}), (200, {}, ME)) as server:
        me = run_apart(whoami(server.url))
    assert (me.org, waits) == ("northwind", [2.0])


def test_it_takes_the_url_and_token_from_arguments_then_the_environment_then_the_config_file(tmp_path):
    config = tmp_path / "config.toml"
    token_file = tmp_path / "t"
    config.write_text(
        f'[default]\nurl = "https://file.example/"\ntoken = "file-token"\n'
        f'[staging]\nurl = "https://staging.example/api/v1"\ntoken_file = "{token_file}"\n'
    )
    token_file.write_text("staging-token\n")
    environ = {"TOLLGATE_CONFIG": str(config)}

    assert (resolve(environ=environ).base_url, resolve(environ=environ).token) == ("https://file.example", "file-token")
    environ |= {"TOLLGATE_URL": "https://env.example", "TOLLGATE_TOKEN": "env-token"}
    assert (resolve(environ=environ).base_url, resolve(environ=environ).token) == ("https://env.example", "env-token")
    given = resolve(base_url="https://arg.example", token="arg-token", environ=environ)
    assert (given.base_url, given.token) == ("https://arg.example", "arg-token")
    staging = resolve(profile="staging", environ={"TOLLGATE_CONFIG": str(config)})
    assert (staging.base_url, staging.token) == ("https://staging.example", "staging-token")


def test_a_missing_profile_or_token_is_a_clear_error(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[default]\nurl = "https://file.example"\n')
    with pytest.raises(ConfigurationError, match="no profile 'prod' .*default"):
        resolve(profile="prod", environ={"TOLLGATE_CONFIG": str(config)})
    with pytest.raises(ConfigurationError, match="no Tollgate token: .*TOLLGATE_TOKEN"):
        resolve(environ={"TOLLGATE_CONFIG": str(config)})


def test_a_wait_gives_up_after_its_timeout_and_names_the_draft():
    waits: list[float] = []
    pending = {"id": 7, "external_id": "run-1/a", "route": "pending"}
    with RefusingServer((200, {}, pending)) as server:
        client = Tollgate(server.url, "t", polling=Polling(timeout=2), sleep=waits.append)
        with pytest.raises(WaitTimeout) as late:
            client.wait_for_draft(7)
    assert late.value.draft_id == 7
    assert waits[:3] == [0.25, 0.375, 0.5625]  # growing by half
    assert sum(waits) == pytest.approx(2)  # the last pause cut short at the timeout


def test_the_command_exits_3_when_tollgate_cannot_be_reached_and_4_on_a_usage_error():
    unhurried = partial(Tollgate, sleep=lambda _: None)
    err = StringIO()
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["whoami", "--url", url, "--token", "t"], stdout=StringIO(), stderr=err, client=unhurried) == 3
    assert err.getvalue().startswith("tollgate: could not reach Tollgate for /whoami after 5 attempt(s)")
    err = StringIO()
    assert main(["gate", "--url", url, "--token", "t"], stdout=StringIO(), stderr=err) == 4
    assert "tollgate gate: error: the following arguments are required: PATH" in err.getvalue()


def test_the_command_takes_its_profile_from_the_config_file_it_is_given(tmp_path):
    out = StringIO()
    with RefusingServer((200, {}, ME)) as server:
        config = tmp_path / "tollgate.toml"
        config.write_text(f'[ci]\nurl = "{server.url}"\ntoken = "t"\n')
        code = main(["--json", "whoami", "--config", str(config), "--profile", "ci"], stdout=out, stderr=StringIO())
    assert (code, json.loads(out.getvalue())) == (0, ME)


def test_an_answer_that_is_not_json_is_an_api_error_naming_the_url():
    not_tollgate = r"not JSON \(text/html\): is http://127.0.0.1:\d+/api/v1/whoami Tollgate"
    with RefusingServer((200, {"Content-Type": "text/html"}, b"<html>")) as server:
        client = Tollgate(server.url, "t")
        with pytest.raises(ApiError, match=not_tollgate):
            client.whoami()

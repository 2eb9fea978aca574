import json
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewer.env import (
    env_bool,
    env_choice,
    env_currency,
    env_float,
    env_int,
    env_judges,
    env_list,
    env_networks,
    env_price,
    env_str,
)
from reviewer.settings import database_from_url
from tests.builders.processes import REPO_ROOT

PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "k" * 20 + "X9!q" * 10 + "z" * 10,
    "ALLOWED_HOSTS": "tollgate.example.com",
}


@pytest.mark.parametrize(
    ("parser", "value"),
    [
        (lambda: env_bool("TG_TEST_VAR", False), "flase"),
        (lambda: env_bool("TG_TEST_VAR", False), "2"),
        (lambda: env_int("TG_TEST_VAR", 1), "ten"),
        (lambda: env_int("TG_TEST_VAR", 1, minimum=1), "0"),
        (lambda: env_float("TG_TEST_VAR", 1.0), "fast"),
        (lambda: env_float("TG_TEST_VAR", 1.0), "nan"),
        (lambda: env_list("TG_TEST_VAR", []), "a,,b"),
        (lambda: env_choice("TG_TEST_VAR", "hashing", ("hashing", "openai")), "word2vec"),
    ],
)
def test_it_rejects_junk_with_a_message_naming_the_variable(monkeypatch, parser, value):
    monkeypatch.setenv("TG_TEST_VAR", value)
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
        parser()


def test_it_parses_good_values(monkeypatch):
    monkeypatch.setenv("TG_TEST_VAR", " Yes ")
    assert env_bool("TG_TEST_VAR", False) is True
    monkeypatch.setenv("TG_TEST_VAR", "off")
    assert env_bool("TG_TEST_VAR", True) is False
    monkeypatch.setenv("TG_TEST_VAR", "a, b")
    assert env_list("TG_TEST_VAR", []) == ["a", "b"]


def test_it_reads_a_secret_from_its_file(monkeypatch, tmp_path):
    (tmp_path / "secret").write_text("s3cret\n")
    monkeypatch.delenv("TG_TEST_VAR", raising=False)
    monkeypatch.setenv("TG_TEST_VAR_FILE", str(tmp_path / "secret"))
    assert env_str("TG_TEST_VAR") == "s3cret"
    monkeypatch.setenv("TG_TEST_VAR_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR_FILE"):
        env_str("TG_TEST_VAR")


def test_it_reads_a_socket_database_url_and_refuses_other_schemes():
    config = database_from_url("postgresql://postgres:@/tollgate?host=/srv/pg&sslmode=disable")
    assert (config["NAME"], config["HOST"], config["OPTIONS"]) == ("tollgate", "/srv/pg", {"sslmode": "disable"})
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url("sqlite:///db.sqlite3")


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_refuses_to_start_with_debug_off_and_no_secret():
    env = PRODUCTION_ENV | {"SECRET_KEY": ""}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_it_refuses_a_junk_debug_value_naming_it():
    result = _manage("check", env={"DEBUG": "flase"})
    assert result.returncode != 0
    assert "DEBUG='flase' is not a boolean" in result.stderr


@pytest.mark.slow
def test_it_passes_the_deploy_check_under_production_settings():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr + result.stdout


@pytest.mark.slow
def test_statements_are_bound_on_the_server_unless_a_pooler_needs_them_bound_on_the_client():
    def binding(env: dict[str, str]) -> list[str]:
        show = "from django.conf import settings; o = settings.DATABASES['default']['OPTIONS'];"
        show += " print(o.get('server_side_binding'), o.get('prepare_threshold'))"
        return _manage("shell", "--no-imports", "-c", show, env=env).stdout.split()

    assert binding({}) == ["True", "5"]
    assert binding({"DATABASE_PREPARE_THRESHOLD": "0"}) == ["None", "None"]


@pytest.mark.parametrize("value", ["10.0.0.0/33", "10.1.2.3/16", "hooks.internal", "10.0.0.0/8,,fd00::/8"])
def test_the_outbound_allowlist_refuses_anything_but_networks(monkeypatch, value):
    monkeypatch.setenv("TG_TEST_VAR", value)
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
        env_networks("TG_TEST_VAR")


def test_the_outbound_allowlist_reads_cidrs_and_single_addresses(monkeypatch):
    monkeypatch.setenv("TG_TEST_VAR", "10.20.0.0/16, fd00::/8, 192.168.1.5")
    assert [str(n) for n in env_networks("TG_TEST_VAR")] == ["10.20.0.0/16", "fd00::/8", "192.168.1.5/32"]
    monkeypatch.delenv("TG_TEST_VAR")
    assert env_networks("TG_TEST_VAR") == ()


# --- named judges (JUDGES_FILE) ------------------------------------------------------------------------------------

DEFAULT_JUDGE = {
    "base_url": "", "model": "gpt-4o-mini", "api_key": "", "timeout_seconds": 60.0, "max_retries": 3,
    "context_tokens": 0, "max_output_tokens": 1_024, "price_input_per_million": None, "price_output_per_million": None,
}  # fmt: skip


def judges_file(tmp_path, monkeypatch, document) -> str:
    path = tmp_path / "judges.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    monkeypatch.setenv("JUDGES_FILE", str(path))
    return str(path)


def test_the_judges_file_adds_named_judges_beside_the_default(tmp_path, monkeypatch):
    (tmp_path / "cheap.key").write_text("sk-cheap\n")
    judges_file(tmp_path, monkeypatch, {
        "cheap": {"base_url": "https://cheap.example.com/v1", "model": "small", "key_file": str(tmp_path / "cheap.key"),
                  "context_tokens": 8192, "price_input_per_million": 0.15, "price_output_per_million": 0.6},
        "local-qwen_2": {"base_url": "http://127.0.0.1:8089/v1", "model": "qwen", "timeout_seconds": 300,
                         "max_retries": 0},
    })  # fmt: skip
    judges = env_judges("JUDGES_FILE", default=DEFAULT_JUDGE)
    assert list(judges) == ["default", "cheap", "local-qwen_2"] and judges["default"] is DEFAULT_JUDGE
    assert judges["cheap"] == {
        "base_url": "https://cheap.example.com/v1", "model": "small", "api_key": "sk-cheap", "timeout_seconds": 60.0,
        "max_retries": 3, "context_tokens": 8192, "max_output_tokens": 1_024, "price_input_per_million": 0.15,
        "price_output_per_million": 0.6,
    }  # fmt: skip
    assert judges["local-qwen_2"] | {"base_url": "", "model": "gpt-4o-mini"} == DEFAULT_JUDGE | {
        "timeout_seconds": 300.0,
        "max_retries": 0,
    }  # no key file: no key; left out: the default judge's limits, the server's context, no prices
    monkeypatch.delenv("JUDGES_FILE")
    assert env_judges("JUDGES_FILE", default=DEFAULT_JUDGE) == {"default": DEFAULT_JUDGE}


GOOD = {"base_url": "https://judge.example.com/v1", "model": "m"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (None, r"JUDGES_FILE='.*missing.json' cannot be read: No such file"),
        ('{"cheap": {', "is not JSON: Expecting"),
        ('["cheap"]', "must hold a JSON object of judges by name"),
        ({"cheap": GOOD | {"api_key": "sk-inline"}}, "judge 'cheap': unknown key 'api_key'"),
        ({"cheap": {"model": "m"}}, "judge 'cheap': base_url is required"),
        ({"cheap": {"base_url": "https://judge.example.com/v1"}}, "judge 'cheap': model is required"),
        ({"cheap": GOOD | {"base_url": "judge.example.com"}}, "judge 'cheap': base_url 'judge.example.com' is not"),
        ({"cheap": GOOD | {"key_file": "/nonexistent/cheap.key"}}, "key_file '/nonexistent/cheap.key' cannot be read"),
        ({"Cheap!": GOOD}, "judge 'Cheap!': a name is 1 to 40 of a-z, 0-9, _ and -"),
        ({"x" * 41: GOOD}, "a name is 1 to 40"),
        ({"default": GOOD}, "judge 'default': `default` is the JUDGE_\\* judge"),
        ({"cheap": GOOD | {"context_tokens": "8k"}}, "judge 'cheap': context_tokens must be an integer, not '8k'"),
        ({"cheap": GOOD | {"max_retries": True}}, "max_retries must be an integer"),
        ({"cheap": GOOD | {"price_input_per_million": -1}}, "price_input_per_million must be at least 0"),
        ({"cheap": GOOD | {"max_output_tokens": 10}}, "max_output_tokens must be at least 64"),
        ({"cheap": "https://judge.example.com/v1"}, "judge 'cheap' must be a JSON object"),
    ],
)
def test_a_bad_judges_file_stops_startup_with_one_message_naming_the_problem(tmp_path, monkeypatch, document, message):
    if document is None:
        monkeypatch.setenv("JUDGES_FILE", str(tmp_path / "missing.json"))
    else:
        judges_file(tmp_path, monkeypatch, document)
    with pytest.raises(ImproperlyConfigured, match=message):
        env_judges("JUDGES_FILE", default=DEFAULT_JUDGE)


def test_a_key_file_is_read_but_never_shown_in_a_message(tmp_path, monkeypatch):
    (tmp_path / "cheap.key").write_text("sk-very-secret")
    judges_file(tmp_path, monkeypatch, {"cheap": GOOD | {"key_file": str(tmp_path / "cheap.key"), "max_retries": -1}})
    with pytest.raises(ImproperlyConfigured) as refused:
        env_judges("JUDGES_FILE", default=DEFAULT_JUDGE)
    assert "max_retries" in str(refused.value) and "sk-very-secret" not in str(refused.value)


def test_prices_are_optional_numbers(monkeypatch):
    monkeypatch.delenv("TG_TEST_VAR", raising=False)
    assert env_price("TG_TEST_VAR") is None
    monkeypatch.setenv("TG_TEST_VAR", "0.15")
    assert env_price("TG_TEST_VAR") == 0.15
    monkeypatch.setenv("TG_TEST_VAR", "-1")
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
        env_price("TG_TEST_VAR")


def test_the_process_refuses_to_start_with_a_bad_judges_file(tmp_path):
    (tmp_path / "judges.json").write_text(json.dumps({"cheap": {"base_url": "https://judge.example.com/v1"}}))
    result = _manage(
        "check", env={"JUDGES_FILE": str(tmp_path / "judges.json"), "JUDGE_PRICE_INPUT_PER_MILLION": "2.5"}
    )
    assert result.returncode != 0
    assert "judge 'cheap': model is required, as a non-empty string" in result.stderr


def test_the_currency_is_a_three_letter_code_and_junk_is_refused(monkeypatch):
    monkeypatch.delenv("TG_TEST_VAR", raising=False)
    assert env_currency("TG_TEST_VAR", "USD") == "USD"
    monkeypatch.setenv("TG_TEST_VAR", " eur ")
    assert env_currency("TG_TEST_VAR", "USD") == "EUR"
    for junk in ("euro", "€", "E1R"):
        monkeypatch.setenv("TG_TEST_VAR", junk)
        with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
            env_currency("TG_TEST_VAR", "USD")

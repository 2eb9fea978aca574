import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewer.env import env_bool, env_choice, env_float, env_int, env_list, env_networks, env_str
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


def test_it_passes_the_deploy_check_under_production_settings():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr + result.stdout


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

"""Single sign-on's settings are read strictly: a rule, an algorithm or a combination that cannot work stops
startup with a message naming it, never a sign-in that fails later."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewer.env import env_group_roles, env_subset
from reviewer.oidc.people import group_rules_check
from tests.builders.processes import REPO_ROOT


def test_the_group_rule_reads_group_org_and_role(monkeypatch):
    monkeypatch.setenv("TG_TEST_VAR", "tollgate-admins=acme:org_admin, cn=ops=acme:operator,/team/x=acme:lead")
    assert env_group_roles("TG_TEST_VAR") == (
        ("tollgate-admins", "acme", "org_admin"),
        ("cn=ops", "acme", "operator"),
        ("/team/x", "acme", "lead"),
    )


@pytest.mark.parametrize("value", ["ops", "ops=acme", "=acme:operator", "ops=:operator", "ops=acme:", "ops=a b:x"])
def test_a_group_rule_that_is_not_group_org_role_is_refused(monkeypatch, value):
    monkeypatch.setenv("TG_TEST_VAR", value)
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
        env_group_roles("TG_TEST_VAR")


@pytest.mark.parametrize("value", ["none", "HS256", "RS256,none"])
def test_only_the_listed_algorithms_are_accepted(monkeypatch, value):
    monkeypatch.setenv("TG_TEST_VAR", value)
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_VAR"):
        env_subset("TG_TEST_VAR", ["RS256"], ("RS256", "ES256"))


def test_a_group_rule_naming_no_role_of_tollgate_is_refused(settings):
    settings.OIDC_GROUP_ROLES = (("ops", "acme", "superuser"),)
    with pytest.raises(ImproperlyConfigured, match="'superuser', which is not one of"):
        group_rules_check()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOCAL_PASSWORDS": "off"}, "OIDC_ISSUER is not set: nobody could sign in"),
        ({"OIDC_ISSUER": "https://id.example.com", "OIDC_CLIENT_ID": ""}, "OIDC_CLIENT_ID must be set"),
        (
            {"OIDC_ISSUER": "https://id.example.com", "OIDC_CLIENT_ID": "t", "OIDC_GROUP_ROLES": "ops=acme:root"},
            "grants 'root'",
        ),
    ],
    ids=["passwords-off-without-a-provider", "no-client-id", "unknown-role"],
)
def test_the_process_refuses_to_start_with_single_sign_on_that_cannot_work(env, message):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO_ROOT,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert message in result.stderr

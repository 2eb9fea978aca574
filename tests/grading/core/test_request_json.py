"""The API's JSON bodies: one parser for every endpoint that reads one, and a 400 that says what is wrong with the
body (not UTF-8, not JSON, nested too deep, a number too long) rather than one message for all of them."""

import json

import pytest

from grading.core.request_json import MAX_DEPTH, MAX_INTEGER_DIGITS
from tests.builders.api_calls import api_caller, row_counts

pytestmark = pytest.mark.django_db

# Every endpoint that reads a JSON body: the body is read before the append looks its conversation up.
JSON_ENDPOINTS = [
    "/conversations", "/conversations/cv-1/messages", "/feedback", "/drafts", "/memory", "/articles", "/labels",
]  # fmt: skip


@pytest.fixture
def api(client, org):
    return api_caller(client, org)


def refusal(response) -> str:
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert [error["field"] for error in body["errors"]] == ["body"]
    return body["errors"][0]["message"]


def nested(depth: int) -> str:
    return '{"messages": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("path", JSON_ENDPOINTS)
def test_it_names_json_nested_a_thousand_deep_as_too_deep(api, path):
    before = row_counts()
    message = refusal(api("post", path, raw=nested(1000)))
    assert message == f"is JSON nested deeper than {MAX_DEPTH} levels"
    assert row_counts() == before


@pytest.mark.parametrize("path", JSON_ENDPOINTS)
def test_it_names_a_five_thousand_digit_integer_as_too_long(api, path):
    before = row_counts()
    message = refusal(api("post", path, raw='{"messages": [], "weight": ' + "9" * 5000 + "}"))
    assert message == f"holds a number longer than {MAX_INTEGER_DIGITS} digits"
    assert row_counts() == before


def test_it_reads_json_at_the_depth_limit_and_refuses_one_level_more(api):
    # The body's own object is the first level; the field's value is refused by the schema, not the parser.
    assert api("post", "/feedback", raw=nested(MAX_DEPTH)).status_code == 400
    assert "nested" not in json.dumps(api("post", "/feedback", raw=nested(MAX_DEPTH)).json())
    assert refusal(api("post", "/feedback", raw=nested(MAX_DEPTH + 1))) == (
        f"is JSON nested deeper than {MAX_DEPTH} levels"
    )


def test_it_reads_an_integer_at_the_digit_limit_and_refuses_one_digit_more(api):
    at_limit = api("post", "/feedback", raw='{"value": -' + "9" * MAX_INTEGER_DIGITS + "}")
    assert "longer than" not in json.dumps(at_limit.json())
    over = '{"value": ' + "9" * (MAX_INTEGER_DIGITS + 1) + "}"
    assert refusal(api("post", "/feedback", raw=over)) == f"holds a number longer than {MAX_INTEGER_DIGITS} digits"


def test_it_says_where_json_breaks_and_which_bytes_are_not_utf8(api):
    assert refusal(api("post", "/drafts", raw='{"body": "x",\n "title": }')) == (
        "is not JSON: Expecting value (line 2, column 11)"
    )
    not_utf8 = refusal(api("post", "/drafts", raw=b'{"body": "caf\xe9"}'))
    assert not_utf8 == "is not UTF-8: invalid continuation byte at byte 13"

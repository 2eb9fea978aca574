"""Labels on the checks a criteria version asks of its own (issue 39): a verdict, a category and a score are stored as
the review stores them; a check the active version does not ask, or an answer its check does not allow, is refused
naming the field and the answers it allows, and nothing is written."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.api.keys import api_key_create
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.dashboard.labels import LabelIn, label_record
from grading.models import AuditEvent, Label
from tests.builders.custom_checks import SUPPORT_CHECKS, custom_checks_item, support_checks_ask

pytestmark = pytest.mark.django_db


def post_labels(client, org, labels: list[dict]):
    key = api_key_create(org=org, name="qa").plaintext
    return client.post(
        "/api/v1/labels", {"labels": labels}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def label(check: str, verdict, **fields) -> dict:
    return {"item": "cv-1", "check": check, "verdict": verdict, "labeller": "ann", **fields}


def test_labels_on_the_versions_own_checks_are_stored_as_the_review_stores_answers(org, client):
    review = custom_checks_item(org)
    sent = [label("cites_policy", "fail"), label("intent", "Shipping"), label("helpful", 4), label("pass_fail", "fail")]
    response = post_labels(client, org, sent)
    assert response.status_code == 201 and response.json()["created"] == 4
    stored = {(row.check_name, row.verdict) for row in Label.objects.all()}
    assert stored == {("cites_policy", "fail"), ("intent", "shipping"), ("helpful", "4"), ("pass_fail", "fail")}
    assert {row.fingerprint for row in Label.objects.all()} == {review.fingerprint}


@pytest.mark.parametrize(
    ("sent", "field", "says"),
    [
        (label("grounded", "pass"), "check", "'grounded' is not a check of the active conversation criteria (v1): "
         "one of cites_policy, intent, helpful, pass_fail"),
        (label("intent", "refunds"), "verdict", "'refunds' is not an answer of 'intent': one of refund, shipping, "
         "other, unknown"),
        (label("helpful", 7), "verdict", "'7' is not an answer of 'helpful': one of 1, 2, 3, 4, 5, unknown"),
        (label("cites_policy", "4"), "verdict", "'4' is not an answer of 'cites_policy': one of pass, fail, unknown"),
        (label("pass_fail", "refund"), "verdict", "'refund' is not a pass_fail label"),
    ],
)  # fmt: skip
def test_a_label_the_active_version_cannot_take_is_refused_naming_it_and_nothing_is_written(
    org, client, sent, field, says
):
    custom_checks_item(org)
    response = post_labels(client, org, [label("intent", "refund"), sent])
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == f"labels.1.{field}" and says in error["message"]
    assert not Label.objects.exists() and not AuditEvent.objects.filter(action="label.create").exists()


def test_a_file_of_labels_on_the_versions_checks_names_each_bad_row_and_imports_the_rest(org, tmp_path):
    custom_checks_item(org)
    path = tmp_path / "labels.csv"
    path.write_text(
        "item,check,verdict,labeller\n"
        "cv-1,intent,other,ann\n"
        "cv-1,helpful,5,ann\n"
        "cv-1,complete,pass,ann\n"
        "cv-1,helpful,five,ann\n"
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("import_labels", str(path), "--org", org.slug, stdout=out, stderr=err)
    assert "2 created, 0 updated, 0 unchanged, 2 bad rows" in out.getvalue()
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("line 4: check: 'complete' is not a check of the active conversation criteria")
    assert lines[1].startswith("line 5: verdict: 'five' is not an answer of 'helpful'")
    assert {(row.check_name, row.verdict) for row in Label.objects.all()} == {("intent", "other"), ("helpful", "5")}


def test_a_check_key_and_a_category_of_thirty_two_characters_are_kept_whole(org):
    key, category = "k" * 32, "c" * 32
    long_check = CheckDefinition(
        key=key, name="Long", question="Which?", kind=AnswerKind.CATEGORY, categories=[category, "other"],
        required=False,
    )  # fmt: skip
    custom_checks_item(org)
    support_checks_ask(org, CheckSet(checks=[*SUPPORT_CHECKS.checks, long_check]))
    result = label_record(
        org=org, label=LabelIn(item="cv-1", check=key, verdict=category, labeller="ann"), source="test"
    )
    assert result.status == "created"
    stored = Label.objects.get()
    assert (stored.check_name, stored.verdict) == (key, category)

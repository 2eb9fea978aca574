"""Labels validated as messages are (issue 20, defect 3): a time outside the years 1 to 9999 once in UTC, a NUL or a
lone surrogate in any text is refused naming the field (the API) or the line (a file), and never reaches a row or a
query; a file goes on past its bad rows, and importing it again still works."""

import importlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from grading.models import Label
from tests.builders.api_calls import api_caller, error_fields
from tests.builders.conversations import support_conversation, upsert

pytestmark = pytest.mark.django_db

GOOD = {"item": "cv-1", "check": "grounded", "verdict": "fail", "labeller": "ann"}
OUT_OF_RANGE = [
    "0001-01-01T00:00:00+14:00",  # 31 December of 1 BC in UTC: stored by PostgreSQL, unreadable by Python
    "9999-12-31T23:00:00-14:00",  # the year 10000 in UTC
]


@pytest.fixture
def api(client, org):
    upsert(org, support_conversation("cv-1"))
    return api_caller(client, org)


@pytest.mark.parametrize("time", OUT_OF_RANGE)
def test_it_refuses_a_label_time_outside_the_years_1_to_9999_in_utc_naming_the_field(api, time):
    response = api("post", "/labels", {"labels": [GOOD, {**GOOD, "labeller": "bo", "time": time}]})
    assert response.status_code == 400
    assert error_fields(response) == ["labels.1.time"]
    assert not Label.objects.exists()


def test_it_keeps_a_label_time_at_the_very_edges_of_the_range(api):
    edges = ["0001-01-01T10:00:00+10:00", "9999-12-31T23:59:59.999999+00:00"]
    labels = [{**GOOD, "labeller": f"ann{n}", "time": time} for n, time in enumerate(edges)]
    assert api("post", "/labels", {"labels": labels}).status_code == 201
    assert [label.labelled_at.year for label in Label.objects.order_by("labeller")] == [1, 9999]


@pytest.mark.parametrize("field", ["item", "labeller"])
@pytest.mark.parametrize("text", ["ann\x00", "ann\ud800"])
def test_it_refuses_a_nul_or_a_lone_surrogate_in_the_item_or_the_labeller_naming_the_field(api, field, text):
    response = api("post", "/labels", {"labels": [GOOD, {**GOOD, field: text}]})
    assert response.status_code == 400
    assert error_fields(response) == [f"labels.1.{field}"]
    assert not Label.objects.exists()


def _import(org, tmp_path, text: str, name: str) -> tuple[str, list[str]]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="some rows were not imported"):
        call_command("import_labels", str(path), "--org", org.slug, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue().splitlines()


def test_a_file_reports_each_hostile_row_by_its_line_imports_the_rest_and_imports_again(api, org, tmp_path):
    rows = [
        {**GOOD, "labeller": "ann"},
        {**GOOD, "labeller": "bo", "time": OUT_OF_RANGE[0]},
        {**GOOD, "labeller": "cy\x00"},
        {**GOOD, "labeller": "dee", "time": OUT_OF_RANGE[1]},
        {**GOOD, "item": "cv\x00-1"},
        {**GOOD, "labeller": "eve"},
    ]
    text = "\n".join(json.dumps(row) for row in rows) + "\n"
    for _ in range(2):  # the second run reads back what the first stored
        out, problems = _import(org, tmp_path, text, "labels.jsonl")
        assert [problem.split(":")[0:2] for problem in problems] == [
            ["line 2", " time"],
            ["line 3", " labeller"],
            ["line 4", " time"],
            ["line 5", " item"],
        ]
    assert "0 created, 0 updated, 2 unchanged, 4 bad rows" in out
    assert sorted(Label.objects.values_list("labeller", flat=True)) == ["ann", "eve"]


def test_a_csv_row_with_a_nul_is_named_and_the_rows_after_it_import(api, org, tmp_path):
    text = "item,check,verdict,labeller\ncv-1,grounded,pass,ann\ncv-1,grounded,pass,b\x00o\ncv-1,usable,pass,cy\n"
    out, problems = _import(org, tmp_path, text, "labels.csv")
    assert problems == ["line 3: labeller: Value error, contains a NUL character"]
    assert "2 created, 0 updated, 0 unchanged, 1 bad row" in out


def test_a_row_that_is_not_utf_8_is_named_and_the_rest_of_the_file_imports(api, org, tmp_path):
    path = tmp_path / "labels.csv"
    path.write_bytes(
        b"item,check,verdict,labeller\ncv-1,grounded,pass,ann\ncv-1,grounded,pass,b\xe9o\ncv-1,usable,pass,cy\n"
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="some rows were not imported"):
        call_command("import_labels", str(path), "--org", org.slug, stdout=out, stderr=err)
    (problem,) = err.getvalue().splitlines()
    assert problem.startswith("line 3: labeller: ") and "unicode" in problem.lower()
    assert sorted(Label.objects.values_list("labeller", flat=True)) == ["ann", "cy"]
    assert "2 created, 0 updated, 0 unchanged, 1 bad row" in out.getvalue()


def test_the_migration_repairs_label_times_stored_before_they_were_refused(api, org, tmp_path):
    assert api("post", "/labels", {"labels": [GOOD]}).status_code == 201
    with connection.cursor() as cursor:  # what an earlier version let in
        cursor.execute("UPDATE grading_label SET labelled_at = '0001-01-01 00:00:00+14:00'")
    with pytest.raises(Exception, match="year"):
        list(Label.objects.all())
    migration = importlib.import_module("grading.migrations.0013_label_times")
    with connection.cursor() as cursor:
        cursor.execute(migration.REPAIR_LABEL_TIMES)
    label = Label.objects.get()
    assert label.labelled_at == label.created_at
    assert api("post", "/labels", {"labels": [GOOD]}).json() == {"created": 0, "updated": 0, "unchanged": 1}

"""The comparison page and API, the dashboard's slice filter and its lists: who may read them, what they show,
and the items behind each number."""

import re

import pytest

from grading.api.keys import api_key_create
from grading.models import Review
from tests.builders.releases import build_releases

pytestmark = pytest.mark.django_db
COMPARE = "/dashboard/compare/?org=northwind&from=2026-W48&to=2026-W48&dimension=release&a=2.3&b=2.4"


@pytest.fixture
def releases(org, fake_llm):
    return build_releases(org, fake_llm)


def test_it_sends_anonymous_people_to_sign_in_and_hides_another_orgs_comparison(
    client, client_for, releases, other_org_operator
):
    assert client.get(COMPARE).status_code == 302
    assert client_for(other_org_operator).get(COMPARE).status_code == 404


def test_a_stakeholder_sees_two_releases_side_by_side_with_the_test_named(client_for, stakeholder, releases):
    page = client_for(stakeholder).get(COMPARE).content.decode()
    row = re.search(r'<tr data-check="grounded" class="differs">(.*?)</tr>', page, re.S).group(1)
    assert "90.0%" in row and "40.0%" in row and "-50.0 pts" in row and "differs" in row
    assert "two-proportion z-test" in page and "Newcombe" in page and "Wilson" in page


def test_each_number_opens_the_reviews_behind_it_in_its_slice(client_for, stakeholder, releases, org):
    client = client_for(stakeholder)
    page = client.get(COMPARE).content.decode()
    row = re.search(r'<tr data-check="grounded" class="differs">(.*?)</tr>', page, re.S).group(1)
    failed_b = re.findall(r'<a href="([^"]+)" class="failed">(\d+)</a>', row)[1]
    listed = client.get(failed_b[0].replace("&amp;", "&")).content.decode()
    expected = Review.objects.counting().filter(
        org=org, slice__contains={"release": "2.4"}, checks__grounded__verdict="fail"
    )
    assert int(failed_b[1]) == expected.count() == 6
    assert sorted(map(int, re.findall(r'<tr data-review="(\d+)"', listed))) == sorted(
        expected.values_list("pk", flat=True)
    )
    assert "release 2.4" in listed


def test_the_dashboard_offers_a_select_per_dimension_and_filters_by_one_value(client_for, stakeholder, releases):
    client = client_for(stakeholder)
    page = client.get("/dashboard/?org=northwind&from=2026-W48&to=2026-W48").content.decode()
    assert (
        'data-dimension="release"' in page and 'value="release=2.4"' in page and 'data-dimension="environment"' in page
    )
    sliced = client.get(
        "/dashboard/?org=northwind&from=2026-W48&to=2026-W48&slice=release%3D2.4&slice="
    ).content.decode()
    assert 'id="sliced"' in sliced and 'value="release=2.4" selected' in sliced
    assert "slice=release%3D2.4" in sliced  # its numbers' links keep the slice


def test_the_export_of_a_slice_holds_its_reviews_alone(client_for, stakeholder, releases):
    response = client_for(stakeholder).get(
        "/dashboard/export/?org=northwind&from=2026-W48&to=2026-W48&slice=environment%3Dstaging"
    )
    rows = b"".join(response.streaming_content).decode().strip().splitlines()
    assert len(rows) - 1 == 3  # the header, then the three staging conversations


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("slice=tier%3Dgold", "slice"),
        ("slice=release%3D2.3&slice=environment%3Dprod", "slice"),
        ("slice=release", "slice"),
    ],
)
def test_a_slice_that_cannot_be_read_is_a_400_naming_it(client_for, stakeholder, releases, query, field):
    response = client_for(stakeholder).get(f"/dashboard/?org=northwind&{query}")
    assert response.status_code == 400 and f"<b>{field}</b>" in response.content.decode()


def test_a_bad_comparison_is_a_400_naming_the_parameter(client_for, stakeholder, releases):
    response = client_for(stakeholder).get(COMPARE.replace("b=2.4", "b=2.3"))
    assert response.status_code == 400 and "<b>b</b>" in response.content.decode()


def test_the_api_compares_for_the_keys_org_and_refuses_naming_the_parameter(client, releases, org):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(org=org, name='tools').plaintext}"}
    query = {"dimension": "release", "a": "2.3", "b": "2.4", "from": "2026-W48", "to": "2026-W48"}
    body = client.get("/api/v1/dashboard/compare", query, **auth).json()
    grounded = next(row for row in body["rows"] if row["check"] == "grounded")
    assert (grounded["a"]["rate"], grounded["b"]["rate"]) == (0.9, 0.4) and grounded["test"].startswith(
        "two-proportion"
    )
    refused = client.get("/api/v1/dashboard/compare", query | {"dimension": "tier"}, **auth)
    assert refused.status_code == 400 and "dimension" in refused.json()["detail"]
    assert client.get("/api/v1/dashboard/compare", query).status_code == 401
    sliced = client.get(
        "/api/v1/dashboard/quality", {"from": "2026-W48", "to": "2026-W48", "slice": "release=2.4"}, **auth
    )
    assert sliced.json()["quality"]["checks"]["grounded"] == {"pass": 4, "fail": 6, "unknown": 0}


def test_a_hostile_value_is_shown_as_text_on_the_dashboard_and_the_comparison(client_for, stakeholder, org, fake_llm):
    hostile = '<img src=x onerror="alert(1)">'
    build_releases(org, fake_llm, plan=((hostile, "prod", "pass", "pass"), ("2.4", "prod", "fail", "pass")))
    client = client_for(stakeholder)
    page = client.get("/dashboard/?org=northwind&from=2026-W48&to=2026-W48").content.decode()
    compared = client.get(
        "/dashboard/compare/", {"org": "northwind", "from": "2026-W48", "to": "2026-W48", "dimension": "release",
                                "a": hostile, "b": "2.4"}
    ).content.decode()  # fmt: skip
    for html in (page, compared):
        assert hostile not in html and "&lt;img" in html

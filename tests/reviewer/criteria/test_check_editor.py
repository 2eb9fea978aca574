"""The version editor's checks, as a criteria admin uses them without JavaScript: add a check with its rules,
reorder and retire, guidance per answer, each error beside its field, the diff, and the published page."""

import html as entities
import re

import pytest
from django.urls import reverse

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.models import CriteriaVersion, ItemKind
from grading.reviews.versions import criteria_new_version, criteria_publish, criteria_update
from tests.builders.check_documents import CITES_POLICY, INTENT, with_checks
from tests.builders.criteria import editor_data, page_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client_for, criteria_admin):
    return client_for(criteria_admin)


@pytest.fixture
def version(org, criteria_admin):
    return criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=criteria_admin)


def text(page) -> str:
    """A response's (or an HTML fragment's) words as read: tags gone, spaces collapsed, none before punctuation."""
    html = page if isinstance(page, str) else page.content.decode()
    words = re.sub(r"\s+", " ", entities.unescape(re.sub(r"<[^>]+>", " ", html)))
    return re.sub(r" ([:;,.)])", r"\1", words)


def new_policy_check(version: CriteriaVersion, **changes: str) -> dict:
    """The editor as opened, with the empty row (the fourth) filled in as "cites the policy" with a phrase rule."""
    return editor_data(
        version,
        **{
            "checks-3-key": "cites_policy",
            "checks-3-name": "Cites the policy",
            "checks-3-question": "Does the assistant cite the policy behind what it promises?",
            "checks-3-kind": "verdict",
            "checks-3-required": "on",
            "checks-3-guidance": "pass: Each promise names its policy.\nfail: A promise with no policy,\nsay a refund.",
            "checks-3-rules-0-kind": "phrases",
            "checks-3-rules-0-phrases": "guaranteed refund\nrefund is guaranteed",
            "checks-3-rules-0-scopes": ["assistant"],
            "checks-3-rules-0-sets": "fail",
            "checks-3-rules-0-note": "A refund is never guaranteed.",
        }
        | changes,
    )


def test_an_admin_adds_a_check_with_a_phrase_rule_and_guidance_per_answer(admin_client, version):
    url = reverse("criteria_version", args=[version.pk])
    response = admin_client.post(url, new_policy_check(version))
    assert response.status_code == 302
    check_set = CriteriaVersion.objects.get(pk=version.pk).check_set()
    assert check_set.keys == ("grounded", "complete", "usable", "cites_policy")
    policy = check_set["cites_policy"]
    assert policy.guidance == {
        "pass": "Each promise names its policy.",
        "fail": "A promise with no policy,\nsay a refund.",
    }
    (rule,) = policy.rules
    assert (rule.kind, rule.phrases, rule.sets, rule.note) == (
        "phrases", ["guaranteed refund", "refund is guaranteed"], "fail", "A refund is never guaranteed."
    )  # fmt: skip
    page = admin_client.get(url)
    html = page.content.decode()
    assert 'value="cites_policy"' in html and "guaranteed refund\nrefund is guaranteed</textarea>" in html
    assert 'name="checks-4-key"' in html  # a new empty row, and one for its rules
    assert 'name="checks-3-rules-1-kind"' in html


def test_positions_reorder_and_retire_removes_a_check(admin_client, version):
    data = editor_data(version) | {"checks-0-ORDER": "3", "checks-2-ORDER": "1", "checks-1-DELETE": "on"}
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 302
    assert CriteriaVersion.objects.get(pk=version.pk).check_set().keys == ("usable", "grounded")


def test_a_category_and_a_score_check_are_added_with_what_passes(admin_client, version):
    data = editor_data(
        version,
        **{
            "checks-3-key": "intent",
            "checks-3-name": "Intent",
            "checks-3-question": "What did the user come for?",
            "checks-3-kind": "category",
            "checks-3-categories": "refund\norder_status\nother",
            "checks-3-passing": "refund order_status",
            "checks-3-required": "on",
        },
    )
    assert admin_client.post(reverse("criteria_version", args=[version.pk]), data).status_code == 302
    intent = CriteriaVersion.objects.get(pk=version.pk).check_set()["intent"]
    assert (intent.categories, intent.passing, intent.required) == (
        ["refund", "order_status", "other"],
        ["refund", "order_status"],
        True,
    )


def test_each_error_of_a_check_and_its_rules_is_shown_beside_its_field_and_nothing_is_saved(admin_client, version):
    data = new_policy_check(
        version,
        **{
            "checks-3-key": "Cites policy",
            "checks-3-rules-0-kind": "pattern",
            "checks-3-rules-0-pattern": r"(refund)\1",
            "checks-0-kind": "category",
            "checks-0-categories": "only_one",
            "checks-1-guidance": "maybe: not an answer",
            "checks-2-guidance": "the judge reads this",
        },
    )
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    rows = response.context["form"].checks.forms
    assert rows[2].errors == {
        "guidance": ["Start each answer's guidance with the answer and a colon, e.g. 'pass: ...'."]
    }
    data["checks-2-guidance"] = ""
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    rows = response.context["form"].checks.forms
    assert rows[0].errors == {"categories": ["a category check has two to eight categories"]}
    assert rows[1].errors == {"guidance": ["guidance for answers the check does not have: ['maybe']"]}
    assert rows[3].errors == {
        "key": ["a key is 1 to 32 lower-case letters, digits or underscores, starting with a letter"]
    }
    assert rows[3].rules.forms[0].errors == {
        "pattern": ["the pattern cannot be matched in linear time (RE2): invalid escape sequence: \\1"]
    }
    html = response.content.decode()
    beside = html[html.index('name="checks-3-rules-0-pattern"') : html.index('name="checks-3-rules-0-case_sensitive"')]
    assert "linear time (RE2)" in beside  # under its own field
    assert "Cites policy" in html  # what the admin typed is kept
    assert CriteriaVersion.objects.get(pk=version.pk).check_set() == CONVERSATION_DEFAULTS


def test_a_rule_typed_without_its_kind_is_refused_rather_than_dropped(admin_client, version):
    data = new_policy_check(version, **{"checks-3-rules-0-kind": ""})
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    assert response.context["form"].checks.forms[3].rules.forms[0].errors == {
        "kind": ["Choose what kind of rule this is: nothing typed here is saved without it."]
    }


def test_a_thirteenth_check_is_refused_for_the_set(admin_client, org, version):
    many = [INTENT | {"key": f"intent_{n}"} for n in range(9)]
    version = criteria_update(version=version, checks=with_checks(version, *many))
    data = editor_data(version)
    assert "checks-12-key" not in data  # twelve: no empty row is offered
    data |= {"checks-TOTAL_FORMS": "13", "checks-12-key": "one_more", "checks-12-name": "One more",
             "checks-12-question": "?", "checks-12-kind": "verdict", "checks-12-scale": "5",
             "checks-12-rules-TOTAL_FORMS": "0", "checks-12-rules-INITIAL_FORMS": "0"}  # fmt: skip
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    assert "At most 12 checks: every one is asked in every judge call." in text(response)


def test_a_post_without_the_checks_leaves_them_as_they_are(admin_client, version):
    version = criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), {"revision": 2, "rubric": "r\n"})
    assert response.status_code == 302
    assert "cites_policy" in CriteriaVersion.objects.get(pk=version.pk).check_set().keys


def test_the_judge_after_a_rule_fail_is_the_admin_s_choice(admin_client, version):
    data = editor_data(version)
    assert data["judge_after_rule_fail"] == "on"  # the default: figures stay comparable
    del data["judge_after_rule_fail"]
    assert admin_client.post(reverse("criteria_version", args=[version.pk]), data).status_code == 302
    assert CriteriaVersion.objects.get(pk=version.pk).check_set().judge_after_rule_fail is False


def test_a_draft_version_edits_its_score_checks_without_rules(admin_client, org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    page = admin_client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    assert 'name="checks-0-key"' in page and 'value="aeo"' in page
    assert 'name="checks-0-rules-0-kind"' not in page and 'name="judge_after_rule_fail"' not in page
    data = editor_data(version) | {"checks-1-name": "Prose"}
    assert admin_client.post(reverse("criteria_version", args=[version.pk]), data).status_code == 302
    assert CriteriaVersion.objects.get(pk=version.pk).check_set()["writing"].name == "Prose"


def test_a_save_from_an_older_revision_keeps_the_checks_typed_and_refuses(admin_client, version):
    data = new_policy_check(version)
    criteria_update(version=version, checks=with_checks(version, INTENT))  # someone else saved meanwhile
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 409 and "your changes were not saved" in text(response)
    assert 'value="cites_policy"' in response.content.decode()
    assert CriteriaVersion.objects.get(pk=version.pk).check_set().keys[-1] == "intent"


def test_the_diff_shows_the_check_added_and_its_rule(admin_client, org, version):
    criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    active = CriteriaVersion.objects.get(org=org, kind=ItemKind.CONVERSATION, is_active=True)
    page = admin_client.get(reverse("criteria_diff"), {"old": active.pk, "new": version.pk})
    html = page.content.decode()
    added = html[html.index('data-list="Checks"') :]
    assert "cites_policy (Cites the policy): pass / fail" in added[: added.index("</div>")]


def test_the_diff_shows_a_rule_added_to_a_check_both_versions_ask(admin_client, org, version):
    version = criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    criteria_publish(version=version)
    newer = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    document = with_checks(newer)
    document["checks"][3]["rules"].append({"kind": "tool_called", "tool": "lookup_policy", "must": True})
    document["checks"][3]["question"] = "Is the policy cited?"
    criteria_update(version=newer, checks=document)
    page = text(admin_client.get(reverse("criteria_diff"), {"old": version.pk, "new": newer.pk}))
    assert "cites_policy: rules added: the tool 'lookup_policy' never called sets fail" in page
    assert "cites_policy: question" in page and "Is the policy cited?" in page


def test_a_published_version_shows_its_checks_and_rules_in_words(admin_client, org, version):
    version = criteria_update(version=version, checks=with_checks(version, CITES_POLICY, INTENT))
    criteria_publish(version=version)
    page = text(admin_client.get(reverse("criteria_version", args=[version.pk])))
    assert "Cites the policy cites_policy · verdict · required" in page
    assert "any of 'guaranteed refund', 'refund is guaranteed' in assistant messages sets fail" in page
    assert "Intent intent · category (refund, order_status, other) · not required" in page
    assert "the judge is still asked" in page


def test_the_preview_of_a_conversation_version_shows_what_its_rules_find(admin_client, org, fake_llm, version):
    from tests.builders.conversations import support_conversation, upsert

    conversation = upsert(org, support_conversation("cv-1")).conversation
    rule = {"kind": "phrases", "phrases": ["on its way"], "scopes": ["assistant"], "sets": "unknown"}
    criteria_update(version=version, checks=with_checks(version, CITES_POLICY | {"rules": [rule]}))
    page = admin_client.get(reverse("criteria_version", args=[version.pk]))
    assert "Preview the rules over recent conversations" in text(page)
    response = admin_client.get(reverse("criteria_preview", args=[version.pk]), {"n": 20})
    assert response.status_code == 200
    html = response.content.decode()
    row = html[html.index(f'data-conversation="{conversation.pk}"') :]
    row = text(row[: row.index("</tr>")])
    assert "Cites the policy → unknown" in row and "m4" in row and "on its way" in row
    assert "not graded → people at best" in row


def test_a_worked_example_may_be_added_on_a_check_with_the_longest_key():
    from reviewer.criteria.forms import ExampleAddForm

    form = ExampleAddForm({"version": 1, "kind": "conversation", "item": 1, "check": "a" * 32})
    assert form.is_valid(), form.errors


@pytest.mark.parametrize("kind", [ItemKind.DRAFT, ItemKind.CONVERSATION])
def test_saving_the_editor_as_the_page_shows_it_keeps_every_check_and_rule(admin_client, org, kind):
    version = criteria_new_version(org=org, kind=kind)
    if kind == ItemKind.CONVERSATION:
        version = criteria_update(version=version, checks=with_checks(version, CITES_POLICY, INTENT))
    before = version.check_set()
    url = reverse("criteria_version", args=[version.pk])
    data = page_form_data(admin_client.get(url).content.decode())
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["form"].errors if response.context else response
    saved = CriteriaVersion.objects.get(pk=version.pk)
    assert (saved.check_set(), saved.revision) == (before, version.revision + 1)


def test_a_check_typed_into_the_page_s_empty_row_is_added(admin_client, version):
    url = reverse("criteria_version", args=[version.pk])
    typed = {
        "checks-3-key": "cites_policy", "checks-3-name": "Cites the policy", "checks-3-question": "Is a policy cited?",
        "checks-3-rules-0-kind": "pattern", "checks-3-rules-0-pattern": r"refund(ed)? \d+ days",
    }  # fmt: skip
    response = admin_client.post(url, page_form_data(admin_client.get(url).content.decode(), **typed))
    assert response.status_code == 302
    policy = CriteriaVersion.objects.get(pk=version.pk).check_set()["cites_policy"]
    (rule,) = policy.rules
    assert (policy.required, rule.pattern, rule.scopes, rule.sets) == (
        True,
        r"refund(ed)? \d+ days",
        ["assistant"],
        "fail",
    )


def test_tool_rules_are_added_a_tool_never_to_call_and_every_call_answered(admin_client, version):
    url = reverse("criteria_version", args=[version.pk])
    typed = {
        "checks-0-rules-TOTAL_FORMS": "2",
        "checks-0-rules-0-kind": "tool_called", "checks-0-rules-0-tool": "issue_refund",
        "checks-0-rules-0-must": "false",
        "checks-0-rules-1-kind": "tools_answered", "checks-0-rules-1-sets": "unknown", "checks-0-rules-1-must": "true",
        "checks-0-rules-1-note": "A call without its result cannot ground a claim.",
    }  # fmt: skip
    response = admin_client.post(url, page_form_data(admin_client.get(url).content.decode(), **typed))
    assert response.status_code == 302
    never, answered = CriteriaVersion.objects.get(pk=version.pk).check_set()["grounded"].rules
    assert (never.kind, never.tool, never.must, never.sets) == ("tool_called", "issue_refund", False, "fail")
    assert (answered.kind, answered.sets, answered.note) == (
        "tools_answered", "unknown", "A call without its result cannot ground a claim."
    )  # fmt: skip
    page = text(admin_client.get(reverse("criteria_diff"), {"old": version.based_on_id, "new": version.pk}))
    assert "grounded: rules added: the tool 'issue_refund' called sets fail" in page


def test_a_post_with_a_check_s_rules_cut_short_is_refused_saying_so(admin_client, version):
    data = editor_data(version)
    del data["checks-1-rules-TOTAL_FORMS"]
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400 and "ManagementForm data is missing" in text(response)
    assert CriteriaVersion.objects.get(pk=version.pk).revision == version.revision


def test_the_preview_of_a_version_without_rules_says_the_judge_alone_answers(admin_client, version):
    response = admin_client.get(reverse("criteria_preview", args=[version.pk]), {"n": 20})
    assert "No check of v2 has a rule: the judge alone answers them" in text(response)


def test_it_shows_a_rows_own_error_and_the_check_sets_in_one_round(admin_client, version):
    # The new check's guidance cannot be read (the form's own check); another check's question is empty (the
    # CheckSet's): both are shown at once, each on its row.
    data = new_policy_check(version, **{"checks-3-guidance": "Each promise names its policy."})
    data["checks-1-question"] = ""
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    rows = response.context["form"].checks.forms
    assert rows[3].errors == {
        "guidance": ["Start each answer's guidance with the answer and a colon, e.g. 'pass: ...'."]
    }
    assert rows[1].errors == {"question": ["may not be empty"]}
    summary = text(response.content.decode().split('id="editor-errors"', 1)[1].split("</div>", 1)[0])
    assert "Not saved: 2 things to fix" in summary
    assert CriteriaVersion.objects.get(pk=version.pk).revision == version.revision

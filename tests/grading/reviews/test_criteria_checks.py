"""A version's checks as the criteria service edits them: saved validated and in order, copied by a clone, refused
per field with nothing written, covered by the editor's lock, and published as any edit is."""

import pytest

from grading.checks.definitions import CONVERSATION_DEFAULTS, DRAFT_DEFAULTS
from grading.models import AuditEvent, CriteriaExample, CriteriaVersion, ItemKind
from grading.reviews.examples import version_fingerprint
from grading.reviews.versions import (
    CriteriaConflict,
    CriteriaInvalid,
    criteria_active,
    criteria_new_version,
    criteria_publish,
    criteria_update,
)
from reviewer.models import Role
from tests.builders.check_documents import CITES_POLICY, HELPFUL, INTENT, with_checks
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


def test_it_saves_a_conversation_version_s_checks_in_order_with_their_rules(org, criteria_admin):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    document = with_checks(version, CITES_POLICY, INTENT, HELPFUL, judge_after_rule_fail=False)
    saved = criteria_update(version=version, actor=criteria_admin, revision=1, checks=document)
    check_set = CriteriaVersion.objects.get(pk=saved.pk).check_set()
    assert check_set.keys == ("grounded", "complete", "usable", "cites_policy", "intent", "helpful")
    assert check_set["cites_policy"].rules[0].phrases == ["guaranteed refund", "refund is guaranteed"]
    assert (check_set["intent"].categories, check_set["helpful"].pass_from) == (["refund", "order_status", "other"], 3)
    assert check_set.judge_after_rule_fail is False and saved.revision == 2
    event = AuditEvent.objects.get(action="criteria.update")
    assert event.detail["changed"] == ["checks"]


def test_a_clone_asks_what_its_source_asks(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    saved = criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    criteria_publish(version=version)
    clone = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    assert clone.check_set() == saved.check_set() and "cites_policy" in clone.check_set().keys


def test_a_rollback_clone_asks_what_the_old_version_asked(org):
    v1 = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    v2 = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=v2, checks=with_checks(v2, CITES_POLICY))
    criteria_publish(version=v2)
    v3 = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, source=v1)
    assert v3.check_set() == CONVERSATION_DEFAULTS


def test_reordering_and_retiring_checks_is_saving_the_list_as_it_should_read(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    document = with_checks(version, CITES_POLICY)
    document["checks"] = [document["checks"][3], document["checks"][0], document["checks"][2]]  # complete retired
    criteria_update(version=version, checks=document)
    version.refresh_from_db()
    assert version.check_set().keys == ("cites_policy", "grounded", "usable")


def test_an_invalid_check_names_each_field_and_writes_nothing(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    bad_rule = {"kind": "pattern", "pattern": r"(refund)\1", "scopes": ["assistant"]}
    bad_category = INTENT | {"categories": ["refund"], "required": True}
    bad_score = HELPFUL | {"key": "helpful", "pass_from": 6}
    document = with_checks(version, CITES_POLICY | {"key": "Cites policy", "rules": [bad_rule]}, bad_category)
    document["checks"].append(bad_score)
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=document)
    assert invalid.value.errors == {
        "checks.3.key": ["a key is 1 to 32 lower-case letters, digits or underscores, starting with a letter"],
        "checks.3.rules.0.pattern": [
            "the pattern cannot be matched in linear time (RE2): invalid escape sequence: \\1"
        ],
        "checks.4.categories": ["a category check has two to eight categories"],
        "checks.5.pass_from": ["the lowest passing score is 1 to 5"],
    }
    assert CriteriaVersion.objects.get(pk=version.pk).check_set() == CONVERSATION_DEFAULTS


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"passing": ["refund", "shipping"]}, "passing", "the passing categories must be among the categories"),
        ({"passing": []}, "passing", "a required category check names the categories that pass"),
        ({"categories": ["refund", "refund"]}, "categories", "categories are distinct lower-case keys"),
        ({"kind": "verdict", "passing": []}, "categories", "only a category check has categories"),
    ],
)
def test_a_checks_own_rule_is_named_at_the_field_it_asks_to_change(org, changes, field, says):
    # Said of the check as a whole (its fields read together), each names its field itself: no message is parsed.
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    document = with_checks(version, INTENT | {"required": True} | changes)
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=document)
    ((path, messages),) = invalid.value.errors.items()
    assert path == f"checks.3.{field}" and messages[0].startswith(says)


def test_more_than_twelve_checks_or_a_key_used_twice_is_refused_for_the_set(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    many = [CITES_POLICY | {"key": f"check_{n}", "rules": []} for n in range(10)]
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=with_checks(version, *many))
    assert invalid.value.errors == {"checks": ["At most 12 checks: every one is asked in every judge call."]}
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=with_checks(version, CITES_POLICY | {"key": "grounded"}))
    assert invalid.value.errors == {"checks": ["each check's key is used once"]}


def test_a_draft_s_checks_are_score_checks_with_no_rules_and_none_required(org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    tone = {"key": "tone", "name": "Tone", "question": "Does the tone fit?", "kind": "score", "required": False}
    criteria_update(version=version, checks=with_checks(version, tone))
    assert CriteriaVersion.objects.get(pk=version.pk).check_set().keys == (*DRAFT_DEFAULTS.keys, "tone")
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    assert set(invalid.value.errors) == {"checks.3.kind", "checks.3.required", "checks.3.rules"}


def test_a_check_with_worked_examples_is_not_retired_until_they_are_removed(org, criteria_admin):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    CriteriaExample.objects.create(
        org=org, criteria_version=version, external_id="cv-1", check_name="complete", human_verdict="fail",
        source="label", fingerprint="f", evidence={"messages": []}, position=1,
    )  # fmt: skip
    document = with_checks(version)
    document["checks"] = [c for c in document["checks"] if c["key"] != "complete"]
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, checks=document)
    assert invalid.value.errors == {
        "checks": ["Worked examples of complete are shown with this version: remove them before retiring complete."]
    }


def test_a_checks_edit_from_an_older_revision_is_refused_and_theirs_kept(org, criteria_admin):
    avery = make_person("avery", org, Role.CRITERIA_ADMIN)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=version, actor=avery, revision=1, checks=with_checks(version, INTENT))
    with pytest.raises(CriteriaConflict):
        criteria_update(version=version, actor=criteria_admin, revision=1, checks=with_checks(version, CITES_POLICY))
    assert CriteriaVersion.objects.get(pk=version.pk).check_set().keys[-1] == "intent"


def test_publishing_a_version_asking_what_the_active_one_asks_is_fine(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=version, checks=with_checks(version))  # saved, unchanged
    published = criteria_publish(version=version)
    assert published.is_active and published.check_set() == CONVERSATION_DEFAULTS


def test_the_criteria_fingerprint_covers_the_checks_and_their_rules(org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    active = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    assert version_fingerprint(version) == version_fingerprint(active)  # a clone reads the same
    version = criteria_update(version=version, checks=with_checks(version, CITES_POLICY))
    with_rule = version_fingerprint(version)
    document = with_checks(version)
    document["checks"][3]["rules"][0]["phrases"] = ["refund guaranteed"]
    version = criteria_update(version=version, checks=document)
    assert len({version_fingerprint(active), with_rule, version_fingerprint(version)}) == 3

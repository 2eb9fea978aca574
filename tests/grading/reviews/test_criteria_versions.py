"""Criteria versions as a service: clones of any version, edits of unpublished ones under an optimistic lock, and
publication that leaves exactly one version active whoever races."""

import threading

import pytest
from django.db import connections

from grading.models import AuditEvent, CriteriaVersion, ItemKind, Review
from grading.reviews.versions import (
    CriteriaConflict,
    CriteriaImmutable,
    CriteriaInvalid,
    criteria_active,
    criteria_new_version,
    criteria_publish,
    criteria_update,
)
from reviewer.models import Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def with_banned_word(version: CriteriaVersion, word: str) -> dict:
    rules = version.draft_rules().model_dump(mode="json")
    rules["banned_words"]["terms"].append(word)
    return rules


def test_a_new_version_clones_the_active_one_and_numbers_only_grow(org, criteria_admin):
    active = criteria_active(org=org, kind=ItemKind.DRAFT)
    first = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=criteria_admin)
    second = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=criteria_admin)
    assert (first.number, second.number) == (2, 3)
    assert (first.rubric, first.rules, first.based_on) == (active.rubric, active.rules, active)
    assert first.author == criteria_admin and first.published_at is None and not first.is_active


def test_rolling_back_is_a_new_version_cloned_from_an_old_one(org, criteria_admin):
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    v2 = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    criteria_update(version=v2, rules=with_banned_word(v2, "gizmo"), rubric="a different rubric")
    criteria_publish(version=v2)
    v3 = criteria_new_version(org=org, kind=ItemKind.DRAFT, source=v1, author=criteria_admin)
    assert (v3.number, v3.based_on, v3.rules, v3.rubric) == (3, v1, v1.rules, v1.rubric)
    v1.refresh_from_db()
    assert v1.published_at is not None and not v1.is_active  # history is kept as it was


def test_a_version_of_another_kind_or_org_cannot_be_cloned(org, other_org):
    conversation_v1 = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    with pytest.raises(ValueError):
        criteria_new_version(org=org, kind=ItemKind.DRAFT, source=conversation_v1)
    with pytest.raises(ValueError):
        criteria_new_version(org=other_org, kind=ItemKind.CONVERSATION, source=conversation_v1)


def test_a_published_version_cannot_be_changed_through_the_service(org, criteria_admin):
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    before = (v1.rubric, v1.rules, v1.revision)
    with pytest.raises(CriteriaImmutable):
        criteria_update(version=v1, actor=criteria_admin, rubric="rewritten")
    with pytest.raises(CriteriaImmutable):
        criteria_update(version=v1, actor=criteria_admin, rules=with_banned_word(v1, "gizmo"), revision=v1.revision)
    v1.refresh_from_db()
    assert (v1.rubric, v1.rules, v1.revision) == before


def test_a_version_published_after_it_was_read_still_cannot_be_changed(org):
    draft = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    stale_copy = CriteriaVersion.objects.get(pk=draft.pk)  # read while still unpublished
    criteria_publish(version=draft)
    with pytest.raises(CriteriaImmutable):
        criteria_update(version=stale_copy, rubric="too late")
    assert CriteriaVersion.objects.get(pk=draft.pk).rubric == draft.rubric


def test_a_draft_version_is_changed_its_rules_normalised_and_its_revision_moved_on(org, criteria_admin):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = with_banned_word(version, "Gizmo")
    saved = criteria_update(version=version, actor=criteria_admin, revision=1, rubric="aeo: ...\r\n", rules=rules)
    saved.refresh_from_db()
    assert saved.rubric == "aeo: ...\n"
    assert saved.draft_rules().banned_words.terms[-1] == "gizmo"
    assert (saved.revision, saved.updated_by) == (2, criteria_admin)
    assert saved.updated_at is not None


def test_an_invalid_edit_names_each_field_and_writes_nothing(org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = with_banned_word(version, "gizmo") | {"threshold": 11}
    rules["banned_words"]["terms"].append("GIZMO")
    with pytest.raises(CriteriaInvalid) as invalid:
        criteria_update(version=version, rubric="  ", rules=rules)
    assert set(invalid.value.errors) == {"rubric", "rules.banned_words.terms", "rules.threshold"}
    assert invalid.value.errors["rules.threshold"] == ["must be at most 10"]
    version.refresh_from_db()
    assert (version.revision, "gizmo" in version.draft_rules().banned_words.terms) == (1, False)


def test_a_save_from_an_older_revision_is_refused_naming_who_saved_and_when(org, criteria_admin):
    other_admin = make_person("avery", org, Role.CRITERIA_ADMIN)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    first = criteria_update(version=version, actor=other_admin, revision=1, rules=with_banned_word(version, "gizmo"))
    with pytest.raises(CriteriaConflict) as conflict:
        criteria_update(version=version, actor=criteria_admin, revision=1, rules=with_banned_word(version, "widget"))
    message = str(conflict.value)
    assert "avery saved draft v2" in message and f"{first.updated_at:%Y-%m-%d %H:%M:%S} UTC" in message
    assert (conflict.value.by, conflict.value.at) == ("avery", first.updated_at)
    kept = CriteriaVersion.objects.get(pk=version.pk)
    terms = kept.draft_rules().banned_words.terms
    assert ("gizmo" in terms, "widget" in terms, kept.revision, kept.updated_by) == (True, False, 2, other_admin)


@pytest.mark.django_db(transaction=True)
def test_two_admins_saving_one_revision_at_once_one_save_is_kept_and_the_other_refused(org, criteria_admin):
    other_admin = make_person("avery", org, Role.CRITERIA_ADMIN)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def save(admin, word: str) -> None:
        try:
            start.wait()
            criteria_update(version=version, actor=admin, revision=1, rules=with_banned_word(version, word))
            outcomes[word] = "saved"
        except CriteriaConflict as conflict:
            outcomes[word] = f"refused: {conflict.by}"
        finally:
            connections.close_all()

    saves = ((criteria_admin, "gizmo"), (other_admin, "widget"))
    threads = [threading.Thread(target=save, args=args) for args in saves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes.values()) in (["refused: avery", "saved"], ["refused: casey", "saved"])
    winner = next(word for word, outcome in outcomes.items() if outcome == "saved")
    loser = next(word for word in outcomes if word != winner)
    kept = CriteriaVersion.objects.get(pk=version.pk)
    assert kept.revision == 2
    assert winner in kept.draft_rules().banned_words.terms and loser not in kept.draft_rules().banned_words.terms


def test_publishing_makes_it_active_immutable_and_records_one_event_with_what_went_stale(org, criteria_admin):
    conversation_item(org, "cv-1")
    conversation_item(org, "cv-2")
    draft_item(org)  # another kind: stays counting
    old = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_publish(version=version, actor=criteria_admin, expected_active_id=old.pk)
    version.refresh_from_db()
    old.refresh_from_db()
    assert (version.is_active, version.published_at is not None, old.is_active) == (True, True, False)
    event = AuditEvent.objects.get(action="criteria.publish")
    assert (event.actor, event.object_id) == (criteria_admin, str(version.pk))
    assert event.detail == {
        "kind": "conversation", "number": 2, "replaces": 1, "reviews_made_stale": 2, "judge": "default"
    }  # fmt: skip
    assert Review.objects.counting().filter(kind=ItemKind.CONVERSATION).count() == 0
    assert Review.objects.counting().filter(kind=ItemKind.DRAFT).count() == 1
    with pytest.raises(CriteriaImmutable):
        criteria_publish(version=version)


def test_publishing_against_a_plan_made_for_another_active_version_is_refused(org, criteria_admin):
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    v2 = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    v3 = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    criteria_publish(version=v2, actor=criteria_admin, expected_active_id=v1.pk)
    with pytest.raises(CriteriaConflict) as conflict:
        criteria_publish(version=v3, expected_active_id=v1.pk)
    assert "casey published draft v2" in str(conflict.value)
    v3.refresh_from_db()
    assert (v3.published_at, v3.is_active) == (None, False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("same_version", [False, True], ids=["two versions", "one version twice"])
def test_two_admins_publishing_at_once_leave_exactly_one_version_active(org, criteria_admin, same_version):
    other_admin = make_person("avery", org, Role.CRITERIA_ADMIN)
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    candidates = [criteria_new_version(org=org, kind=ItemKind.DRAFT) for _ in range(2)]
    if same_version:
        candidates = [candidates[0], candidates[0]]
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def publish(admin, version) -> None:
        try:
            start.wait()
            criteria_publish(version=version, actor=admin, expected_active_id=v1.pk)
            outcomes.append("published")
        except (CriteriaConflict, CriteriaImmutable) as refused:
            outcomes.append(type(refused).__name__)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=publish, args=(admin, version))
        for admin, version in zip((criteria_admin, other_admin), candidates, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    refusal = "CriteriaImmutable" if same_version else "CriteriaConflict"
    assert sorted(outcomes) == sorted(["published", refusal])
    active = list(CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, is_active=True))
    assert len(active) == 1 and active[0] in candidates
    assert CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, published_at__isnull=False).count() == 2
    assert AuditEvent.objects.filter(action="criteria.publish").count() == 1

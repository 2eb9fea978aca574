"""The diff of two criteria versions: the rubric line by line, each rule list as the entries added and removed, and
the values that changed."""

import pytest

from grading.criteria.impact import ListChange, RubricRow, ValueChange, criteria_diff
from grading.models import ItemKind
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_update

pytestmark = pytest.mark.django_db


def test_it_lists_exactly_the_entries_added_and_removed_and_the_values_changed(org):
    old = criteria_active(org=org, kind=ItemKind.DRAFT)
    new = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = old.draft_rules().model_dump(mode="json")
    rules["banned_words"]["terms"] = [t for t in rules["banned_words"]["terms"] if t not in ("delve", "robust")]
    rules["banned_words"]["terms"] += ["gizmo", "widgetize"]
    rules["h2"]["openings"].append("Whether")
    rules["banned_characters"]["characters"][0]["substitute"] = "; "
    rules |= {"threshold": 7.5, "band": 1.0}
    rules["repair"]["component_missing"] = False
    criteria_update(version=new, rules=rules)
    new.refresh_from_db()

    diff = criteria_diff(old=old, new=new)
    assert diff.lists == [
        ListChange("Banned words", added=["gizmo", "widgetize"], removed=["delve", "robust"]),
        ListChange(
            "Banned characters",
            added=["'—' (em dash) becomes '; '"],
            removed=["'—' (em dash) becomes ', '"],
        ),
        ListChange("H2 openings", added=["Whether"], removed=[]),
    ]
    assert diff.values == [
        ValueChange("Threshold", "7", "7.5"),
        ValueChange("Band", "0.5", "1"),
        ValueChange("Repair missing components", "on", "off"),
    ]
    assert not diff.rubric_changed and not diff.unchanged


def test_the_rubric_diff_pairs_changed_lines_side_by_side(org):
    old = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    new = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    lines = old.rubric.splitlines()
    edited = [lines[0], "grounded: changed wording.", *lines[2:], "extra: a fourth check."]
    criteria_update(version=new, rubric="\n".join(edited) + "\n")
    new.refresh_from_db()

    rows = criteria_diff(old=old, new=new).rubric
    changed = [row for row in rows if row.tag != "equal"]
    assert changed == [
        RubricRow("replace", lines[1], "grounded: changed wording."),
        RubricRow("insert", None, "extra: a fourth check."),
    ]
    assert [row.old for row in rows if row.old is not None] == lines
    assert [row.new for row in rows if row.new is not None] == edited


def test_a_version_is_unchanged_against_its_clone(org):
    old = criteria_active(org=org, kind=ItemKind.DRAFT)
    diff = criteria_diff(old=old, new=criteria_new_version(org=org, kind=ItemKind.DRAFT))
    assert diff.unchanged and diff.lists == [] and diff.values == []


def test_versions_of_two_kinds_do_not_compare(org):
    with pytest.raises(ValueError):
        criteria_diff(
            old=criteria_active(org=org, kind=ItemKind.DRAFT), new=criteria_active(org=org, kind=ItemKind.CONVERSATION)
        )

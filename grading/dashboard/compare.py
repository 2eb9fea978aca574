"""Two slices side by side ("release 2.3 against 2.4"): what the comparison page and `GET /api/v1/dashboard/compare`
show, one function for both.

Both slices are read from the counters (each review books its counters under each dimension value it was filed
under when graded: grading/figures/definitions.py `slice_keys`), under one criteria version, the active one of the
kind, over the same weeks, application and reach: the item as a whole and each pass-or-fail check it asks, its pass
rate over the answers that pass or fail with the unknowns beside it (never inside it), each rate's Wilson 95%
interval, the difference b - a with Newcombe's hybrid score interval and a pooled two-proportion z-test of it
(grading/figures/difference.py), and the volume.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from grading.core.outcomes import UNKNOWN_CHECK
from grading.core.schemas import METADATA_VALUE_MAX, identifier_checked
from grading.core.weeks import iso_week
from grading.dashboard.figures import (
    NOT_SAMPLED,
    Counters,
    InvalidScope,
    Scope,
    counters_for,
    judged_share,
    route_counted_as,
)
from grading.figures.agreement import wilson_interval
from grading.figures.definitions import PASS_FAIL, slice_key
from grading.figures.difference import INTERVAL_METHOD, TEST_METHOD, difference_of
from grading.models import ItemKind, Route
from grading.models.reach import Reach
from grading.reviews.rollups import slices_seen

# A difference whose test gives p below this is marked as one. The interval is Newcombe's, the test the pooled z:
# near the edge the two may disagree, so the page shows both rather than deriving one from the other.
SIGNIFICANT = 0.05
# The counters a side is counted from (`_counts`): the item's route and each check's answers, none of the rest.
COMPARED_METRICS = frozenset({"route", "check"})


@dataclass(frozen=True)
class Slices:
    """What was asked to be compared: a dimension of the org's and two of its values."""

    dimension: str
    a: str
    b: str

    def key(self, side: str) -> str:
        return slice_key(self.dimension, getattr(self, side))


def slices_checked(scope: Scope, *, dimension: str | None, a: str | None, b: str | None) -> Slices:
    """The comparison asked for, or InvalidScope naming the parameter: the dimension must be one of the org's, the
    two values given, different, and values an item could carry."""
    dimension = (dimension or "").strip()
    if dimension not in scope.org.dimensions:
        named = ", ".join(scope.org.dimensions) or "none: an org admin declares them"
        raise InvalidScope("dimension", f"must be one of the org's dimensions ({named})")
    values = {}
    for side, value in (("a", a), ("b", b)):
        value = (value or "").strip()
        if not value:
            raise InvalidScope(side, "a value of the dimension is needed on each side")
        if len(value) > METADATA_VALUE_MAX:
            raise InvalidScope(side, f"at most {METADATA_VALUE_MAX} characters")
        try:
            values[side] = identifier_checked(value)
        except ValueError as refused:
            raise InvalidScope(side, str(refused)) from None
    if values["a"] == values["b"]:
        raise InvalidScope("b", "must differ from a: a slice compared with itself differs by nothing")
    return Slices(dimension, values["a"], values["b"])


def dimension_values(reach: Reach, dimensions: list[str]) -> dict[str, list[str]]:
    """Each of the org's dimensions with the values its counters within `reach` were booked under: what a select
    offers the reader."""
    seen: dict[str, list[str]] = {name: [] for name in dimensions}
    for key in slices_seen(reach=reach):
        name, _, value = key.partition("=")
        if name in seen:
            seen[name].append(value)
    return seen


def _side(counts: Counter, passed: str, failed: str, unknown: str) -> dict:
    n = counts[passed] + counts[failed]
    answered = n + counts[unknown]
    interval = wilson_interval(counts[passed], n)
    return {
        "passed": counts[passed],
        "failed": counts[failed],
        "unknown": counts[unknown],
        "n": n,
        "rate": counts[passed] / n if n else None,
        "interval": list(interval) if interval else None,
        "unknown_share": counts[unknown] / answered if answered else None,
    }


def _counts(c: Counters, kind: str) -> Counter:
    """The item as a whole (its route; for a conversation, held as unknown when a required check was) and each
    check's answers (check:answer), of the active version, in the scope."""
    counts: Counter = Counter()
    for (*_, route, reason), n in c.pick(kind, "route"):
        counts[f"{PASS_FAIL}:{route}"] += n
        if route == Route.HUMAN and (kind == ItemKind.DRAFT or reason == UNKNOWN_CHECK):
            counts[f"{PASS_FAIL}:unknown"] += n
        counts["reviews"] += n
        counts[NOT_SAMPLED] += n if route_counted_as(route, reason) == NOT_SAMPLED else 0
    for (*_, check, answer), n in c.pick(kind, "check"):
        counts[f"{check}:{answer}"] += n
    return counts


def _volume(value: str, key: str, counts: Counter) -> dict:
    """A side's value and how many reviews it holds, with the share of them the judge was asked about."""
    share = judged_share(graded=counts["reviews"], not_sampled=counts[NOT_SAMPLED])
    return {"value": value, "slice": key, "reviews": counts["reviews"], **share}


def _row(key: str, name: str, question: str, a: Counter, b: Counter) -> dict:
    sides = {
        side: _side(counts, f"{key}:pass", f"{key}:fail", f"{key}:unknown") for side, counts in (("a", a), ("b", b))
    }
    difference = difference_of(sides["a"]["passed"], sides["a"]["n"], sides["b"]["passed"], sides["b"]["n"])
    return {
        "check": key,
        "name": name,
        "question": question,
        **sides,
        **difference.as_json(),
        "significant": difference.p_value is not None and difference.p_value < SIGNIFICANT,
    }


def comparison(scope: Scope, slices: Slices, *, kind: str = ItemKind.CONVERSATION) -> dict:
    """The two slices of `scope` side by side (JSON-ready): the item as a whole first (`pass_fail`), then each
    check of the active version whose answers include pass and fail, in the version's order."""
    a = counters_for(replace(scope, slice=slices.key("a")), metrics=COMPARED_METRICS)
    b = counters_for(replace(scope, slice=slices.key("b")), metrics=COMPARED_METRICS, active=a.active)
    counters = {"a": a, "b": b}
    counts = {side: _counts(c, kind) for side, c in counters.items()}
    active = counters["a"].active.get(kind)
    whole_question = (
        "Did the draft pass the gate (held for people: unknown)?"
        if kind == ItemKind.DRAFT
        else "Did the conversation pass (held because a required check was unknown: unknown)?"
    )
    rows = [_row(PASS_FAIL, "the item as a whole", whole_question, counts["a"], counts["b"])]
    rows += [
        _row(check.key, check.name, check.question, counts["a"], counts["b"])
        for check in (counters["a"].asked(kind).checks if kind == ItemKind.CONVERSATION else ())
        if {"pass", "fail"} <= set(check.answers)
    ]
    return {
        "org": scope.org.slug,
        "from": iso_week(scope.since),
        "to": iso_week(scope.until),
        "application": scope.application or None,
        "kind": kind,
        "criteria_version": active.number if active is not None else None,
        "dimension": slices.dimension,
        **{side: _volume(getattr(slices, side), slices.key(side), counts[side]) for side in ("a", "b")},
        "rows": rows,
        "methods": {
            "rate": "passed / (passed + failed), unknowns beside it; Wilson 95% interval",
            "difference": "rate of b minus rate of a",
            "interval": INTERVAL_METHOD,
            "test": TEST_METHOD,
            "significant_below": SIGNIFICANT,
        },
    }

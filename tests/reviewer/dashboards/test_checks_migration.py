"""Nothing lost on the way (issue 39, item 6): migration grading/0028 gives every existing criteria version the checks
it always asked, so on the demo's data the dashboard's figures and the exports read the same before and after it.

The demo is seeded, read, the database taken back to 0027 (the checks column gone, as it was before versions defined
their own) and forward again with the migrations themselves, and read again. A version the demo seeds with checks of
its own did not exist before 0028: its checks are put back after the round trip, so what is compared for it is the
reading, and for every other version what the migration gave it.

The round trip also drops what the certified panel's counters are counted from (0031: the judge's confidences, the
certificate a review was routed under): 0044 fills the pass probabilities again without them and 0045 recounts those
counters (0046 with people's audit verdicts). Every other counter is left as it was, and so is when it last changed."""

import csv
import io

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from grading.dashboard.figures import dashboard_figures, scope_for
from grading.figures.definitions import CERTIFIED
from grading.models import CriteriaVersion, ItemKind, Rollup
from grading.models.criteria import default_checks
from grading.reviews.rollups import WHOLE, live_counters, slice_of, stored_counters
from reviewer.dashboards import export, reads
from reviewer.demo import demo_seed

BEFORE_CHECKS = [("grading", "0027_service_target_counters")]
# Export columns whose values a migration after 0028 holds (0031: the judge's confidences, the certificate a review
# was routed under; 0036: the dimension values it was filed under): taking the database back past it drops them, so
# they are not the round trip's to compare.
LATER_COLUMNS = ("confidences", "certificate", "slice")


def _read(org) -> dict:
    """What a stakeholder reads of the org: the dashboard (from the stored counters and from a recount of the
    reviews) and the CSV export of each kind, with only the moment of reading left out, and when the counters last
    changed (`_counters` compares that counter by counter)."""
    scope = scope_for(org)
    out = {}
    for name, rows in (("stored", None), ("recounted", live_counters(org_ids=[org.pk]))):
        figures = dashboard_figures(scope, rows=rows)
        figures.pop("generated_at")
        figures["queue"].pop("oldest_wait_seconds")  # how long ago, read at two moments
        figures["staleness"]["rollup"].pop("last_write")  # the newest counter's time: the certified ones' after
        out[name] = figures
    for kind in ItemKind.values:
        f = reads.ReviewFilter(kind=kind)
        checks = reads.checks_asked(org, kind)
        rows = export.export_rows(reads.reviews_behind(org, scope, f), f=f, reader_id=None, checks=checks)
        table = list(csv.reader(io.StringIO("".join(export.as_csv(rows, export.columns_for(checks))))))
        kept = [index for index, column in enumerate(table[0]) if column not in LATER_COLUMNS]
        out[f"export_{kind}"] = [[row[index] for index in kept] for row in table]
    return out


def _counters(org) -> dict:
    """The org's counters of its whole cells (the dashboard's) but the certified panel's, each with when it last
    changed."""
    columns = ("kind", "criteria_id", "application", "week", "metric", "key1", "key2", "value", "updated_at")
    rows = Rollup.objects.filter(org=org, slice=WHOLE).exclude(metric=CERTIFIED).values_list(*columns)
    return {row[:-2]: row[-2:] for row in rows}


def _certified(counters: dict) -> dict:
    return {key: value for key, value in slice_of(counters).items() if key[5] == CERTIFIED}


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_reads_every_figure_and_export_of_the_demo_the_same_before_and_after_the_migration():
    org = demo_seed()
    before, counters = _read(org), _counters(org)
    for section in ("quality", "gate", "agreement"):  # the counters the page reads are the reviews' own
        assert before["stored"][section] == before["recounted"][section], section
    assert before["stored"]["quality"]["checks"] and before["export_conversation"][1:]  # something to compare
    # Checks a version was given after 0028 (the demo's own), to put back: 0028 never saw such a version.
    own = {
        pk: checks
        for pk, kind, checks in CriteriaVersion.objects.values_list("pk", "kind", "checks")
        if checks != default_checks(kind).model_dump(mode="json")
    }

    _migrate(BEFORE_CHECKS)
    with connection.cursor() as cursor:
        columns = [c.name for c in connection.introspection.get_table_description(cursor, "grading_criteriaversion")]
    assert "checks" not in columns  # as it was before versions defined their own
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    for pk, checks in own.items():
        CriteriaVersion.objects.filter(pk=pk).update(checks=checks)

    after = _read(org)
    for part in before:
        assert after[part] == before[part], part
    assert _counters(org) == counters
    certified = _certified(stored_counters(org_ids=[org.pk]))
    assert certified and certified == _certified(live_counters(org_ids=[org.pk]))

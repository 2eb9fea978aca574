"""What an erasure takes from regression sets: the copies of its items, with what each run said of them.

A set item is a copy of an item's evidence, so an erased item's copies go with it, in the erasure's batch
(grading/erasure/items.py calls `set_copies_erase` in its transaction). Each set it leaves counts it (`erased`), and
the figures of its finished runs are computed again without it: a run's figures name items (the changed ones) and
must not go on counting what no longer exists.
"""

from collections.abc import Sequence

from django.db.models import F

from grading.models import RegressionItem, RegressionRun, RegressionSet, RunState
from grading.sets.runs import run_figures


def set_copies_erase(*, org_id: int, kind: str, item_ids: Sequence[int]) -> int:
    """Delete the copies of the items in every set of the org (run items go with them); the copies deleted."""
    copies = RegressionItem.objects.select_for_update().filter(org_id=org_id, kind=kind, item_id__in=list(item_ids))
    per_set: dict[int, int] = {}
    for set_id in copies.values_list("regression_set_id", flat=True):
        per_set[set_id] = per_set.get(set_id, 0) + 1
    if not per_set:
        return 0
    deleted = copies.delete()[1].get(RegressionItem._meta.label, 0)
    for set_id, count in per_set.items():
        RegressionSet.objects.filter(pk=set_id).update(erased=F("erased") + count)
    finished = RegressionRun.objects.filter(regression_set_id__in=per_set, state=RunState.DONE)
    for run in finished.select_related("criteria_version", "regression_set"):
        run.figures = run_figures(run)
        run.save(update_fields=["figures"])
    return deleted

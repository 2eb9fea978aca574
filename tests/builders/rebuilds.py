"""What else happens while a rebuild of the counters counts: another rebuild, a migration."""

from collections.abc import Callable
from typing import Any

from grading.reviews import rollups
from tests.builders.database import on_a_connection_of_its_own


def while_a_rebuild_counts(monkeypatch, meanwhile: Callable[[], Any]) -> list:
    """Have `meanwhile` run to its end on a connection of its own while the next rebuild counts (after its
    snapshot, before it books); the list it fills with what `meanwhile` returned."""
    returned = []
    audit = rollups.staleness_audit

    def counting(org):
        monkeypatch.setattr(rollups, "staleness_audit", audit)  # once: a rebuild `meanwhile` runs counts as ever
        returned.append(on_a_connection_of_its_own(meanwhile))
        return audit(org)

    monkeypatch.setattr(rollups, "staleness_audit", counting)
    return returned

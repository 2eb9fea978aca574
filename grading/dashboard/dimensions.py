"""Which metadata names an org's figures are sliced by (its dimensions): at most a few, declared by an org admin
on the org's Dimensions page or with `manage.py org dimensions`.

A review is filed under the item's values of the dimensions declared when it is graded (grading/reviews/services.py,
`Review.slice`) and never moved, so a change applies to the reviews graded from then on: a name declared today
slices what is graded from today; one removed leaves the reviews filed under it as they are, and is no longer
offered. Each dimension multiplies the counters a review books (grading/reviews/rollups.py), hence the bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from grading.core.schemas import DIMENSIONS_MAX, METADATA_NAME
from grading.models import Org
from grading.models.audit import audit_record

NAME_MAX = 64  # a metadata name's length (grading/core/schemas.py MetadataKey)
_NAME = re.compile(METADATA_NAME, re.ASCII)


class DimensionsRefused(ValueError):
    """Why a list of dimensions cannot be declared, in words a person can act on."""


def dimensions_checked(names: Sequence[str]) -> list[str]:
    """The names as they would be stored (trimmed, in the order given), or DimensionsRefused saying why not."""
    out: list[str] = []
    for name in (name.strip() for name in names):
        if not name:
            continue
        if len(name) > NAME_MAX or not _NAME.fullmatch(name):
            raise DimensionsRefused(
                f"{name[:NAME_MAX]!r} is not a metadata name: a letter, then letters, digits, _ . or -, "
                f"at most {NAME_MAX} characters"
            )
        if name in out:
            raise DimensionsRefused(f"{name!r} is named twice")
        out.append(name)
    if len(out) > DIMENSIONS_MAX:
        raise DimensionsRefused(f"at most {DIMENSIONS_MAX} dimensions: each multiplies the counters a review books")
    return out


def org_dimensions_set(*, org: Org, dimensions: Sequence[str], actor: AbstractBaseUser | None = None) -> bool:
    """Declare the org's dimensions (DimensionsRefused when they cannot be), audited with who did it; whether
    anything changed."""
    wanted = dimensions_checked(dimensions)
    with transaction.atomic():
        locked = Org.objects.select_for_update().get(pk=org.pk)
        was = list(locked.dimensions)
        if was == wanted:
            return False
        locked.dimensions = wanted
        locked.save(update_fields=["dimensions"])
        audit_record(action="org.dimensions", org=locked, actor=actor, detail={"dimensions": wanted, "was": was})
    org.dimensions = wanted
    return True

"""What the commands for positioned selectors share (service-level targets, assignment rules; see
grading/reviews/targets.py): their options (the items a selector matches by kind, application and reason, and its
position among the org's, where lower positions decide first), the checks of those options, the writes both kinds
make alike (find one at a position, replace one in place, swap one with its neighbour), and how the commands print
and audit a selector."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import CommandParser
from django.db.models import QuerySet

from grading.core.outcomes import HUMAN_REASONS
from grading.management.options import ChangeRefused, option_field, text_option
from grading.models import ApiKey, ItemKind, Org
from grading.models.audit import audit_record
from grading.reviews.targets import AUDIT, Selector

APPLICATION_NAME_MAX = 100  # the application columns' length (conversations, reviews, targets, rules)
POSITION_MAX = 2**31 - 1  # the largest value of a position column (an integer in Postgres)
REASONS = (*HUMAN_REASONS, AUDIT)  # what --reason may name: why items went to people, or the audit sample


class Positioned(Selector, Protocol):
    position: int
    org: Org

    def save(self, *, update_fields: list[str]) -> None: ...


Row = TypeVar("Row", bound=Positioned)
# No selector stands here: the place one passes through while two swap (positions are unique per org, checked row by
# row, and a position is from 1).
_PASSING = 0


@dataclass(frozen=True)
class Kind:
    """What tells one kind of positioned selector from the other in the writes they share."""

    what: str  # its name in refusals: "target", "assignment rule"
    described: Callable[[Any], dict]  # what the audit trail keeps of one (`as_dict` and its own fields)
    audited_as: str  # the prefix of its audit actions: `<audited_as>.replace`, `<audited_as>.move`


# --- arguments ----------------------------------------------------------------------------------------------------


def add_arguments(parser: CommandParser, *, what: str) -> None:
    """The org, the items the selector matches (each default: any), and where it goes among the org's."""
    parser.add_argument("--org", required=True, help="org slug")
    parser.add_argument("--kind", choices=ItemKind.values, default="", help="default: any kind")
    parser.add_argument("--application", help="default: any application")
    parser.add_argument("--reason", choices=REASONS, default="", help=f"default: any reason; {AUDIT}: the sample")
    parser.add_argument("--position", type=int, help="lower positions decide first (default: after the last)")
    parser.add_argument("--replace", action="store_true", help=f"with --position: replace the {what} there, if any")


def add_listing_and_removal(actions, *, listing: str, removal: str, what: str) -> None:
    """The action that lists the selectors (of every org unless --org) and the one that removes one by position."""
    listed = actions.add_parser(listing, help=f"list {what}s, of every org unless --org")
    listed.add_argument("--org", help="org slug")
    removed = actions.add_parser(removal, help=f"delete the {what} at a position")
    removed.add_argument("--org", required=True, help="org slug")
    removed.add_argument("--position", type=int, required=True)


# --- validation: every refusal before anything is written ---------------------------------------------------------


def application_option(raw: str | None) -> str:
    """`--application`: absent is any application; present, a name that is not empty and fits the column."""
    if raw is None:
        return ""
    return text_option(
        raw,
        option="--application",
        empty="leave it out for any application",
        names="application names",
        limit=APPLICATION_NAME_MAX,
    )


def fields(options: dict, *, what: str) -> dict:
    """The fields that say which items the selector matches, refused when they would match none."""
    kind = options["kind"]
    application = application_option(options["application"])
    if kind == ItemKind.DRAFT and application:
        raise ChangeRefused(
            f"drafts are filed under no application: a draft {what} naming one would match nothing", field="application"
        )
    return {"kind": kind, "application": application, "reason": options["reason"]}


def position_option(position: int, *, option: str = "--position") -> int:
    if not 1 <= position <= POSITION_MAX:
        raise ChangeRefused(f"{option} must be from 1 to {POSITION_MAX}", field=option_field(option))
    return position


def position_to_set(options: dict, *, what: str) -> int | None:
    """The position that adding or replacing a selector names; None for after the last."""
    if options["position"] is None:
        if options["replace"]:
            raise ChangeRefused(f"--replace needs --position: the {what} to replace", field="position")
        return None
    return position_option(options["position"])


def next_position(org: Org, last: int, *, what: str) -> int:
    """The position after the org's last selector (`last`, 0 for none); refused past the column's largest value."""
    if last >= POSITION_MAX:
        raise ChangeRefused(
            f"the last {what} of {org.slug} is at position {POSITION_MAX}: give this one a --position", field="position"
        )
    return last + 1


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------------


def acting(actor: AbstractBaseUser | None, api_key: ApiKey | None) -> dict:
    """Who a change is audited under: the person (page, command, a personal token) or the org's key (the API)."""
    return {"actor": actor, "api_key": api_key}


def at_position(rows: QuerySet[Row], org: Org, position: int, *, kind: Kind, nothing: str) -> Row:
    """The org's selector at `position` among `rows`, refused when there is none ("nothing `nothing`")."""
    row = rows.filter(position=position).first()
    if row is None:
        raise ChangeRefused(f"no {kind.what} at position {position} in {org.slug}; nothing {nothing}", field="position")
    return row


def replace_in_place(row: Row, *, fields: dict, kind: Kind, acting: dict) -> dict | None:
    """Give the selector `fields` in place (same row, same position), audited with what it was (`acting`: who). What
    it was; None when that changes nothing (nothing written)."""
    was = kind.described(row)
    for field, value in fields.items():
        setattr(row, field, value)
    if kind.described(row) == was:
        return None
    row.save(update_fields=list(fields))
    _audit(row, "replace", kind=kind, acting=acting, was=was)
    return was


def swap_with_neighbour(row: Row, rows: QuerySet[Row], *, earlier: bool, kind: Kind, acting: dict) -> Row | None:
    """Swap the selector with the one before it among `rows` (`earlier`) or after it, each move audited with where it
    stood; the neighbour, or None when there is none (nothing written)."""
    position = row.position
    neighbours = (
        rows.filter(position__lt=position).order_by("-position")
        if earlier
        else rows.filter(position__gt=position).order_by("position")
    )
    neighbour = neighbours.first()
    if neighbour is None:
        return None
    to = neighbour.position
    _place(neighbour, _PASSING)
    _place(row, to)
    _place(neighbour, position)
    _audit(row, "move", kind=kind, acting=acting, was_position=position)
    _audit(neighbour, "move", kind=kind, acting=acting, was_position=to)
    return neighbour


def move_to(row: Positioned, position: int, *, kind: Kind, acting: dict) -> None:
    """Move the selector to a free `position`, audited with where it stood."""
    was = row.position
    _place(row, position)
    _audit(row, "move", kind=kind, acting=acting, was_position=was)


def _audit(row: Positioned, verb: str, *, kind: Kind, acting: dict, **was: object) -> None:
    """A change to the selector, in the trail as `<kind>.<verb>`: the selector as it is now, and what it was."""
    audit_record(
        action=f"{kind.audited_as}.{verb}", org=row.org, **acting, target=row, detail=kind.described(row) | was
    )


def _place(row: Positioned, position: int) -> None:
    row.position = position
    row.save(update_fields=["position"])


# --- how the commands print and audit them ------------------------------------------------------------------------


def as_dict(selector: Positioned) -> dict:
    """What the audit trail keeps of a selector (each kind's own fields follow)."""
    return {
        "position": selector.position,
        "kind": selector.kind,
        "application": selector.application,
        "reason": selector.reason,
    }


def matched_text(kind: str, application: str, reason: str) -> str:
    return f"{kind or 'any kind'} · {application or 'any application'} · {reason or 'any reason'}"

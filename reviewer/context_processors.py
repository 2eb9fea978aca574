from django.http import HttpRequest

from reviewer.access import memberships_of, setup_orgs_of
from reviewer.models import Role


def navigation(request: HttpRequest) -> dict:
    """The navigation a person's roles open up; the views enforce the same rules on their own."""
    memberships = memberships_of(request)
    roles = {membership.role for membership in memberships}
    items = []
    if roles & {Role.OPERATOR, Role.LEAD}:
        items.append(("queue", "Queue"))
    if Role.CRITERIA_ADMIN in roles:
        items.append(("criteria", "Criteria"))
    if roles:
        items.append(("dashboard", "Dashboard"))
        items.append(("monitors", "Monitors"))
    # A lead of part of an org does not set up its queue (reviewer/setup/views.py): no link to a 403.
    sets_up = bool(roles & {Role.LEAD, Role.ORG_ADMIN}) and bool(setup_orgs_of(memberships))
    if sets_up:
        items.append(("setup_targets", "Set-up"))
    if Role.ORG_ADMIN in roles:
        items.append(("orgadmin_members", "Org"))
        items.append(("audit", "Audit"))
    return {"nav_items": items, "user_roles": sorted(roles), "sets_up_queue": sets_up}

from django.http import HttpRequest

from reviewer.access import roles_of
from reviewer.models import Role


def navigation(request: HttpRequest) -> dict:
    """The navigation a person's roles open up; the views enforce the same rules on their own."""
    roles = roles_of(request.user)
    items = []
    if roles & {Role.OPERATOR, Role.LEAD}:
        items.append(("queue", "Queue"))
    if Role.CRITERIA_ADMIN in roles:
        items.append(("criteria", "Criteria"))
    if roles:
        items.append(("dashboard", "Dashboard"))
    if Role.ORG_ADMIN in roles:
        items.append(("orgadmin_members", "Org"))
        items.append(("audit", "Audit"))
    return {"nav_items": items, "user_roles": sorted(roles)}

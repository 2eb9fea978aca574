"""A personal token as the API's caller: the person, in the token's org, with the roles and reach their memberships
give now (read at each request, so a role taken away is gone from the token at once), let through only to the
operations `routes.PERSON_ROUTES` opens to one of those roles. Registered with grading's API in reviewer/apps.py."""

import re
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from ninja.errors import HttpError

from grading.models import Org
from grading.models.reach import Reach
from reviewer.access import EVERY_ROLE, reaches_of
from reviewer.models import Membership, PersonalToken, Role
from reviewer.tokens.routes import ORG_KEY_ONLY, PERSON_ROUTES
from reviewer.tokens.services import token_authenticate


@dataclass(frozen=True)
class PersonCaller:
    """grading/api/keys.py `Caller`, for a person: what `request.auth` is under a personal token."""

    token: PersonalToken
    person: AbstractBaseUser
    org: Org
    roles: frozenset[str]
    reach: Reach  # what all their memberships of the org cover

    @property
    def org_id(self) -> int:
        return self.org.pk

    @property
    def name(self) -> str:
        return self.token.name


_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def operation_of(request: HttpRequest) -> str:
    """The operation asked for, as the OpenAPI document names it: `POST /api/v1/queue/items/{review_id}/claim`."""
    route = _PARAMETER.sub(r"{\1}", request.resolver_match.route)
    return f"{request.method} /{route}"


class NoLongerMember(Exception):
    """A live token whose person holds no role in its org any more: refused, with what to do about it."""


def person_caller(plaintext: str) -> PersonCaller | None:
    """The person a live token acts as, with the roles and reach their memberships of its org give now (read at each
    call: a role taken away is gone from the token at once); None for an unknown, revoked or expired token. Raises
    NoLongerMember when its person left the org. The API's authentication and the MCP server's both start here; what
    each lets the caller do is their own."""
    token = token_authenticate(plaintext)
    if token is None:
        return None
    roles = frozenset(Membership.objects.filter(user=token.user, org=token.org).values_list("role", flat=True))
    if not roles:
        raise NoLongerMember(f"{token.user.get_username()} is no longer a member of {token.org.name}: revoke the token")
    reach = reaches_of(token.user, *EVERY_ROLE)[token.org.pk]
    return PersonCaller(token=token, person=token.user, org=token.org, roles=roles, reach=reach)


def operation_refusal(caller: PersonCaller, operation: str) -> str | None:
    """Why `caller` may not call `operation` (named as the OpenAPI document names it), or None when one of their
    roles opens it (`routes.PERSON_ROUTES`)."""
    allowed = PERSON_ROUTES.get(operation)
    if allowed is None:
        why = ORG_KEY_ONLY.get(operation, "not open to personal tokens")
        return f"{operation} takes the org's API key ({why})"
    if not caller.roles & allowed:
        needed = ", ".join(sorted(Role(role).label for role in allowed))
        held = ", ".join(sorted(Role(role).label for role in caller.roles))
        return f"your roles in {caller.org.name} ({held}) do not include this: it takes {needed}"
    return None


def person_authenticate(request: HttpRequest, plaintext: str) -> PersonCaller | None:
    """The person a live token acts as; None (401) for an unknown, revoked or expired token; a 403 saying why when
    its person is no longer a member of its org, or has no role the operation takes."""
    try:
        caller = person_caller(plaintext)
    except NoLongerMember as exc:
        raise HttpError(403, str(exc)) from None
    if caller is None:
        return None
    if refusal := operation_refusal(caller, operation_of(request)):
        raise HttpError(403, refusal)
    return caller

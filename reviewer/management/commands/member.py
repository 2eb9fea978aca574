"""`manage.py member`: who belongs to which org, in which role, covering what. The way to make an org's first org
admin, who manages the rest from the org pages (/org/); both change memberships through reviewer/orgadmin/members.py,
so they refuse and audit alike."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.management.orgs import org_from_option, org_listing
from grading.models import Org
from reviewer.models import Membership, Role
from reviewer.orgadmin.members import (
    APPLICATION_NAME_MAX,
    WHOLE_ORG_ROLES,
    MembershipExists,
    MembershipRefused,
    applications_checked,
    membership_grant,
    membership_revoke,
    membership_scope,
)


class Command(BaseCommand):
    help = "Add, list or remove memberships: a user's role in an org, over the whole org or some applications."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="give a user a role in an org, or change what that membership covers")
        _add_identity_arguments(add)
        add.add_argument(
            "--applications",
            help='comma-separated application names it is limited to (default: the whole org); "" for drafts only',
        )
        add.add_argument("--no-drafts", action="store_true", help="with --applications: leave drafts out")
        listing = actions.add_parser("list", help="list memberships, of every org unless --org")
        listing.add_argument("--org", help="org slug")
        remove = actions.add_parser("remove", help="take a role in an org away from a user")
        _add_identity_arguments(remove)

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "list":
            memberships = Membership.objects.select_related("org", "user").order_by(
                "org__slug", "user__username", "role"
            )
            for membership in org_listing(memberships, org):
                self.stdout.write(_line(membership))
            return
        the_org = org_from_option(org)
        user = _user(options["user"])
        role = Role(options["role"])
        if action == "add":
            applications = _applications(options["applications"], no_drafts=options["no_drafts"], role=role)
            try:
                applications_checked(org=the_org, role=role, applications=applications)
            except MembershipRefused as refused:
                raise CommandError(str(refused)) from refused
            self._add(the_org, user, role, applications=applications, drafts=not options["no_drafts"])
        else:
            self._remove(the_org, user, role)

    def _add(
        self, org: Org, user: AbstractBaseUser, role: Role, *, applications: list[str] | None, drafts: bool
    ) -> None:
        try:
            membership = membership_grant(org=org, user=user, role=role, applications=applications, drafts=drafts)
        except MembershipExists:
            membership = Membership.objects.select_related("org", "user").get(user=user, org=org, role=role)
        except MembershipRefused as refused:
            raise CommandError(str(refused)) from refused
        else:
            self.stdout.write(f"added: {_line(membership)}")
            return
        was = _covers(membership)
        try:
            membership, changed = membership_scope(membership=membership, applications=applications, drafts=drafts)
        except MembershipRefused as refused:
            raise CommandError(str(refused)) from refused
        self.stdout.write(f"updated: {_line(membership)} (was {was})" if changed else f"unchanged: {_line(membership)}")

    def _remove(self, org: Org, user: AbstractBaseUser, role: Role) -> None:
        membership = Membership.objects.select_related("org", "user").filter(user=user, org=org, role=role).first()
        if membership is None:
            raise CommandError(f"{user.get_username()} is not {role.value} in {org.slug}; nothing removed")
        try:
            membership_revoke(membership=membership)
        except MembershipRefused as refused:
            raise CommandError(str(refused)) from refused
        self.stdout.write(f"removed: {org.slug}  {user.get_username()}  {role.value}")


def _add_identity_arguments(parser: CommandParser) -> None:
    parser.add_argument("--org", required=True, help="org slug")
    parser.add_argument("--user", required=True, help="username of an existing user")
    parser.add_argument("--role", required=True, choices=Role.values)


def _user(username: str) -> AbstractBaseUser:
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None:
        # Making people is the admin's job (passwords, e-mail); a typo here must not create a stranger.
        raise CommandError(
            f"no user {username!r}: the user must exist first "
            "(create one in the Django admin, or with `python manage.py createsuperuser`)"
        )
    return user


def _applications(raw: str | None, *, no_drafts: bool, role: Role) -> list[str] | None:
    """The application names `--applications` limits a membership to (None: the whole org), refused unless the
    membership they make is one the `membership_reach_covers_something` constraint allows."""
    if raw is None:
        if no_drafts:
            raise CommandError("--no-drafts needs --applications: a membership of the whole org covers drafts too")
        return None
    if role in WHOLE_ORG_ROLES:
        raise CommandError(
            f"a {role.label} covers the whole org (criteria versions govern every application of their kind; keys, "
            "retention and erasure are the org's); leave out --applications and --no-drafts"
        )
    names = [] if not raw.strip() else [name.strip() for name in raw.split(",")]
    if "" in names:
        raise CommandError(f"--applications {raw!r} has an empty application name")
    too_long = [name for name in names if len(name) > APPLICATION_NAME_MAX]
    if too_long:
        raise CommandError(f"application names are at most {APPLICATION_NAME_MAX} characters: {too_long[0][:40]!r}…")
    if not names and no_drafts:
        raise CommandError("no applications and --no-drafts: that membership would cover nothing")
    # A set in effect (reaches are unions of sets); sorted, so the same reach always reads and compares the same.
    return sorted(set(names))


def _line(membership: Membership) -> str:
    return f"{membership.org.slug}  {membership.user.get_username()}  {membership.role}  {_covers(membership)}"


def _covers(membership: Membership) -> str:
    if membership.applications is None:
        return "whole org"
    if not membership.applications:
        return "drafts only"
    named = "applications: " + ", ".join(membership.applications)
    return f"{named} · drafts" if membership.drafts else named

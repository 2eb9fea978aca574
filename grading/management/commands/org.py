"""`manage.py org`: make an org, list them, or declare an org's dimensions (the metadata names its figures are
sliced by). How a deployment gets its first org (and any other): then `manage.py member add --role org_admin` makes
its first org admin, who runs the rest from the org pages."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from grading.dashboard.dimensions import DimensionsRefused, org_dimensions_set
from grading.management.orgs import require_migrated
from grading.models import Org
from grading.models.audit import audit_record

SLUG_MAX = Org._meta.get_field("slug").max_length
NAME_MAX = Org._meta.get_field("name").max_length


class Command(BaseCommand):
    help = "Add an org (a tenant: its people, keys, criteria and items are its own), or list the orgs."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="make an org")
        add.add_argument("--slug", required=True, help="its short name in URLs and commands, e.g. acme")
        add.add_argument("--name", required=True, help="its name as pages show it, e.g. 'Acme Corp'")
        actions.add_parser("list", help="list the orgs")
        dimensions = actions.add_parser("dimensions", help="show or declare the metadata names figures are sliced by")
        dimensions.add_argument("--slug", required=True, help="the org's")
        dimensions.add_argument("names", nargs="*", help="the names (at most three); none: show them")
        dimensions.add_argument("--clear", action="store_true", help="slice by nothing from now on")

    def handle(self, *args, action: str, **options) -> None:
        require_migrated()
        if action == "list":
            for slug, name in Org.objects.order_by("slug").values_list("slug", "name"):
                self.stdout.write(f"{slug}  {name}")
            return
        if action == "dimensions":
            self._dimensions(options["slug"], options["names"], clear=options["clear"])
            return
        slug, name = options["slug"], options["name"].strip()
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(f"--slug {slug!r}: letters, digits, hyphens and underscores only") from None
        if len(slug) > SLUG_MAX:
            raise CommandError(f"--slug is at most {SLUG_MAX} characters")
        if not name or len(name) > NAME_MAX:
            raise CommandError(f"--name must have 1 to {NAME_MAX} characters")
        try:
            with transaction.atomic():
                org = Org.objects.create(slug=slug, name=name)
                audit_record(action="org.create", org=org, detail={"slug": slug, "name": name})
        except IntegrityError:  # the unique slug
            raise CommandError(f"an org with slug {slug!r} exists already") from None
        self.stdout.write(f"added: {org.slug}  {org.name}")

    def _dimensions(self, slug: str, names: list[str], *, clear: bool) -> None:
        org = Org.objects.filter(slug=slug).first()
        if org is None:
            raise CommandError(f"--slug {slug!r}: no such org")
        if names or clear:
            try:
                changed = org_dimensions_set(org=org, dimensions=names)
            except DimensionsRefused as refused:
                raise CommandError(f"names: {refused}") from None
            self.stdout.write("changed" if changed else "no change")
        self.stdout.write(f"{org.slug} is sliced by: {', '.join(org.dimensions) or 'nothing'}")

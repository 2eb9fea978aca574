from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.models import ApiKey, Org
from grading.services import api_key_create, api_key_revoke


class Command(BaseCommand):
    help = "Create, list or revoke an org's API keys. A new key is printed once and stored only as a hash."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="issue a key and print it once")
        create.add_argument("--org", required=True, help="org slug")
        create.add_argument("--name", required=True, help="what the key is for, e.g. the pipeline's name")
        listing = actions.add_parser("list", help="list keys (never their secrets)")
        listing.add_argument("--org", required=True)
        revoke = actions.add_parser("revoke", help="revoke a key by its prefix")
        revoke.add_argument("--org", required=True)
        revoke.add_argument("--prefix", required=True)

    def handle(self, *args, action: str, org: str, **options) -> None:
        try:
            the_org = Org.objects.get(slug=org)
        except Org.DoesNotExist:
            raise CommandError(f"no org with slug {org!r}") from None
        if action == "create":
            issued = api_key_create(org=the_org, name=options["name"])
            self.stdout.write(issued.plaintext)
        elif action == "list":
            for key in ApiKey.objects.filter(org=the_org).order_by("created_at"):
                state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "live"
                used = f"{key.last_used_at:%Y-%m-%d %H:%M}" if key.last_used_at else "never"
                self.stdout.write(f"{key.prefix}…  {key.name}  {state}  last used {used}")
        else:
            key = ApiKey.objects.filter(org=the_org, prefix=options["prefix"]).first()
            if key is None:
                raise CommandError(f"no key with prefix {options['prefix']!r} in {org}")
            api_key_revoke(api_key=key)
            self.stdout.write(f"revoked {key.prefix}…")

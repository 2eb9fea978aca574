from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.api.keys import api_key_create, api_key_revoke
from grading.management.orgs import org_from_option
from grading.models import ApiKey, Org


class Command(BaseCommand):
    help = "Create, list or revoke API keys. A new key is printed once and stored only as a hash."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="issue a key and print it once")
        create.add_argument("--org", required=True, help="org slug")
        create.add_argument("--name", required=True, help="what the key is for, e.g. the pipeline's name")
        listing = actions.add_parser("list", help="list keys (never their secrets), of every org unless --org")
        listing.add_argument("--org", help="org slug")
        revoke = actions.add_parser("revoke", help="revoke a key by its prefix (as `list` shows it)")
        revoke.add_argument("--prefix", required=True)
        revoke.add_argument("--org", help="org slug; needed only if keys of two orgs share the prefix")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        the_org = org_from_option(org) if org else None
        if action == "create":
            issued = api_key_create(org=the_org, name=options["name"])
            self.stdout.write(issued.plaintext)
        elif action == "list":
            self._list(the_org)
        else:
            self._revoke(the_org, options["prefix"])

    def _list(self, org: Org | None) -> None:
        keys = ApiKey.objects.select_related("org").order_by("org__slug", "created_at")
        for key in keys.filter(org=org) if org else keys:
            state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "live"
            used = f"{key.last_used_at:%Y-%m-%d %H:%M}" if key.last_used_at else "never"
            self.stdout.write(f"{key.org.slug}  {key.prefix}…  {key.name}  {state}  last used {used}")

    def _revoke(self, org: Org | None, prefix: str) -> None:
        # `list` prints the prefix with an ellipsis; a pasted one must still match.
        prefix = prefix.rstrip("…").rstrip(".")
        keys = ApiKey.objects.select_related("org").filter(prefix=prefix)
        matches = list(keys.filter(org=org) if org else keys)
        if not matches:
            raise CommandError(f"no key with prefix {prefix!r}" + (f" in {org.slug}" if org else ""))
        if len(matches) > 1:
            orgs = ", ".join(sorted({key.org.slug for key in matches}))
            raise CommandError(f"{len(matches)} keys (of {orgs}) have prefix {prefix!r}: name the org with --org")
        [key] = matches
        api_key_revoke(api_key=key)
        self.stdout.write(f"revoked {key.prefix}… of {key.org.slug}")

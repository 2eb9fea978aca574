from django.core.management.base import CommandError

from grading.models import Org


def org_from_option(slug: str | None) -> Org:
    """The org a command acts on: `--org SLUG`, or the only org there is."""
    if slug:
        org = Org.objects.filter(slug=slug).first()
        if org is None:
            raise CommandError(f"no org with slug {slug!r}")
        return org
    orgs = list(Org.objects.all()[:2])
    if len(orgs) != 1:
        raise CommandError("say which org with --org SLUG")
    return orgs[0]

"""The one list of an org's applications a person chooses from (`applications_known`): what its conversations,
the model calls on their way, its targets, rules, memberships and invitations name, and nothing of another org."""

import pytest

from grading.models import PendingCall, ServiceTarget
from reviewer.models import AssignmentRule, Invitation, Membership, Role
from reviewer.queue.reads import applications_known
from tests.builders.conversations import applications_of
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


def test_it_lists_every_application_the_org_names_once_sorted(org, other_org):
    applications_of(org, "support")
    PendingCall.objects.create(org=org, trace_id="t" * 32, span_id="s" * 16, application="voice")
    PendingCall.objects.create(org=org, trace_id="u" * 32, span_id="s" * 16, application="spam", refused="too big")
    ServiceTarget.objects.create(org=org, position=1, application="returns", minutes=60)
    ServiceTarget.objects.create(org=org, position=2, minutes=60)  # any application: names none
    AssignmentRule.objects.create(org=org, position=1, application="billing", person=make_person("ann", org))
    Membership.objects.create(user=make_person("cy"), org=org, role=Role.OPERATOR, applications=["billing", "legal"])
    Invitation.objects.create(org=org, email="di@example.com", role=Role.OPERATOR, applications=["onboarding"])
    applications_of(other_org, "globex-bot")
    assert applications_known(org) == ["billing", "legal", "onboarding", "returns", "support", "voice"]

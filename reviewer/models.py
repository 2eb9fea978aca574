"""The people side: who belongs to which org, in which role (or is invited to), and who holds which queue item."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from grading.models import ItemSelector, Org


class Role(models.TextChoices):
    OPERATOR = "operator", "operator"
    CRITERIA_ADMIN = "criteria_admin", "criteria admin"
    STAKEHOLDER = "stakeholder", "stakeholder"
    LEAD = "lead", "lead"  # works the queue as an operator does, and assigns its items
    ORG_ADMIN = "org_admin", "org admin"  # members, API keys, the webhook secret, retention, erasure, the audit trail


def _reach_covers_something(name: str) -> models.CheckConstraint:
    """A limited reach (of a membership, or of the invitation that becomes one) covers something (an empty list
    without drafts would be a role with nothing in it), and is never a criteria admin's or an org admin's."""
    return models.CheckConstraint(
        condition=models.Q(applications__isnull=True)
        | (
            ~models.Q(role__in=["criteria_admin", "org_admin"])
            & (models.Q(drafts=True) | models.Q(applications__len__gt=0))
        ),
        name=name,
    )


class Membership(models.Model):
    """A user's role in an org. A person with two roles in one org has two memberships.

    A membership covers the whole org, or only some of it (its reach, grading/models/reach.py): the conversations of
    the applications it names, and drafts (the draft gate, an application of its own) when `drafts` says so.
    A criteria admin's membership always covers the whole org: a criteria version governs every application of its
    kind, and publishing it re-grades them all. So does an org admin's: keys, retention and erasure are the org's.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    # No reverse accessors on grading's models: the domain core never reaches into the people side.
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices)
    applications = ArrayField(
        models.CharField(max_length=100),
        null=True,
        blank=True,
        help_text="Empty (null): the whole org. Otherwise only these applications' conversations.",
    )
    drafts = models.BooleanField(default=True, help_text="With applications named: whether drafts are covered too.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "org", "role"], name="membership_unique_role"),
            _reach_covers_something("membership_reach_covers_something"),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.get_role_display()} · {self.org}"


class Invitation(models.Model):
    """An org's offer of a role to an e-mail address, for whoever controls the address to accept: an org admin adds
    someone who is not yet a member of the org this way (reviewer/orgadmin/invitations.py). It grants nothing until
    accepted, through the link mailed to the address or with single sign-on from the link's page, and is then gone.

    The link's secret is kept only as a SHA-256 (`link_digest`), like an API key's; sending the invitation again
    makes a new one, and the link works for PASSWORD_RESET_TIMEOUT after `link_sent_at`.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    email = models.EmailField(help_text="Lower-cased.")
    role = models.CharField(max_length=20, choices=Role.choices)
    applications = ArrayField(models.CharField(max_length=100), null=True, blank=True)
    drafts = models.BooleanField(default=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    link_digest = models.CharField(max_length=64, null=True, blank=True, unique=True)
    link_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "email", "role"], name="invitation_unique_role"),
            _reach_covers_something("invitation_reach_covers_something"),  # as the membership it becomes
        ]

    def __str__(self) -> str:
        return f"{self.email} · {self.get_role_display()} · {self.org}"


class SignInIdentity(models.Model):
    """A person as an OpenID provider knows them: the issuer and its `sub`, which (unlike an email) never moves
    to someone else. Made on the first single sign-on of the person (reviewer/oidc)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_in_identities")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sign_in_identity_unique")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class Claim(models.Model):
    """An operator's lease on a review routed to humans.

    Live while it has not ended and `expires_at` is still ahead: expiry is a comparison with now, so no
    job has to free anything. An expired claim is closed (as `expired`) by whoever takes the item over.
    An item has as many live claims as open slots (`CriteriaVersion.slots`: one, unless several people decide it);
    the claim services count them under the review's row lock, and the partial unique constraint makes a second
    open claim by one person on one review impossible, not unlikely.
    """

    class End(models.TextChoices):
        RELEASED = "released", "released"
        DECIDED = "decided", "decided"
        ANSWERED = "answered", "answered"  # one slot of an item several people decide
        DECLINED = "declined", "declined"  # given back with a reason; never an answer
        EXPIRED = "expired", "expired"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey("grading.Review", on_delete=models.CASCADE, related_name="+")
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="claims")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=16, choices=End.choices, blank=True)
    reason = models.TextField(blank=True, help_text="Why the holder declined the item.")

    class Meta:
        constraints = [
            # An item several people decide has a claim per slot; one person never holds two of one item.
            models.UniqueConstraint(
                fields=["review", "holder"], condition=models.Q(ended_at__isnull=True), name="claim_one_open_per_holder"
            ),
            models.CheckConstraint(
                condition=models.Q(ended_at__isnull=True, end="")
                | models.Q(ended_at__isnull=False) & ~models.Q(end=""),
                name="claim_end_with_reason",
            ),
        ]
        indexes = [
            models.Index(fields=["org", "expires_at"], condition=models.Q(ended_at__isnull=True), name="claim_open"),
            models.Index(
                fields=["holder", "expires_at"], condition=models.Q(ended_at__isnull=True), name="claim_open_by_holder"
            ),
        ]

    def __str__(self) -> str:
        return f"claim of review {self.review_id} by {self.holder_id} until {self.expires_at:%H:%M}"


class Pool(models.Model):
    """A named set of an org's people that queue items can be assigned to (the billing team)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="pools", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="pool_unique_name")]

    def __str__(self) -> str:
        return self.name


def _one_assignee(name: str) -> models.CheckConstraint:
    """An assignment, by hand or by rule, names a person or a pool, never both or neither."""
    return models.CheckConstraint(condition=models.Q(person__isnull=True) ^ models.Q(pool__isnull=True), name=name)


class Assignment(models.Model):
    """Who may claim a queue item (a review waiting for people): one person or a pool, until `until` (from then on
    anyone whose reach covers it), or for as long as it waits. At most one per review; reassigning replaces it.
    It belongs to the review: an item graded again waits as a new review, unassigned unless a rule says otherwise.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.OneToOneField("grading.Review", on_delete=models.CASCADE, related_name="+")
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    until = models.DateTimeField(null=True, blank=True)
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    assigned_at = models.DateTimeField()

    class Meta:
        constraints = [_one_assignee("assignment_one_assignee")]

    def __str__(self) -> str:
        return f"review {self.review_id} to {self.person or self.pool}"


class AssignmentRule(ItemSelector):
    """Assignment by rule: the items of a kind, application and reason (blank: any) go to a person or a pool,
    for `hours` after they were routed to people (null: as long as they wait). Read when someone claims, so an
    item is reserved from the moment it waits; the lowest `position` among the rules that match decides, and an
    assignment by hand overrides every rule."""

    reason = models.CharField(max_length=64, blank=True, help_text="A routing reason, or `audit` for the sample.")
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    hours = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "position"], name="assignment_rule_unique_position"),
            _one_assignee("assignment_rule_one_assignee"),
        ]

    def __str__(self) -> str:
        return f"rule {self.position} of {self.org_id}"


class Escalation(models.Model):
    """How an org is told about items due soon or overdue (service-level targets): whom (the people an item is
    reserved for, the org's leads), how long before the due time to warn (0: only when overdue), and a signed
    webhook. The sweep (reviewer/queue/escalation.py) reads due times from `swept_until` on, so each run costs what
    the newly due items cost, however many were overdue before."""

    org = models.OneToOneField(Org, on_delete=models.CASCADE, related_name="+")
    warn_minutes = models.PositiveIntegerField(default=0)
    to_assignees = models.BooleanField(default=True)
    to_leads = models.BooleanField(default=True)
    webhook_url = models.URLField(max_length=1000, blank=True)
    swept_until = models.DateTimeField(help_text="Due times up to here (and warnings up to here + warn) are done.")

    def __str__(self) -> str:
        return f"escalation of {self.org_id}"


class Notice(models.Model):
    """That people were told about one item passing one threshold: at most one per item and threshold, whatever
    the sweeps and retries do."""

    class Threshold(models.TextChoices):
        DUE_SOON = "due_soon", "due soon"
        OVERDUE = "overdue", "overdue"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey("grading.Review", on_delete=models.CASCADE, related_name="+")
    threshold = models.CharField(max_length=16, choices=Threshold.choices)
    due_at = models.DateTimeField()
    noticed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["review", "threshold"], name="notice_once_per_threshold")]

    def __str__(self) -> str:
        return f"{self.threshold} notice of review {self.review_id}"


class Preferences(models.Model):
    """A person's own settings on the pages. Someone with no row has the defaults, so the row is written only when
    they change one."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    next_after_decision = models.BooleanField(
        default=True, help_text="After a decision, open the next free item (claim next) rather than the queue."
    )

    def __str__(self) -> str:
        return f"preferences of user {self.user_id}"


class PersonalToken(models.Model):
    """A person's credential for the API, in one org of theirs (reviewer/tokens/): it acts as the person, with the
    roles and reach their memberships of that org give at each request, so a role taken away is gone from the token
    at once and a membership removed leaves it refused. Stored as a SHA-256, like an org's API key."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_tokens")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the token, to recognise it by.")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until revoked.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.user}/{self.name} ({self.prefix}…)"

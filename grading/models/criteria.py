"""Criteria versions, and the trials of an unpublished one; how many people decide an item, and who adjudicates."""

from collections.abc import Collection

from django.conf import settings
from django.db import models

from grading.checks.definitions import CONVERSATION_DEFAULTS, DRAFT_DEFAULTS, CheckSet
from grading.checks.rules import DraftRules
from grading.models.orgs import Org


class ItemKind(models.TextChoices):
    DRAFT = "draft", "draft"
    CONVERSATION = "conversation", "conversation"


class SlotsFor(models.TextChoices):
    """Which of a version's items for people more than one person decides (`CriteriaVersion.slots`)."""

    AUDIT = "audit", "the audit sample"
    PEOPLE = "people", "every item for people"
    SHARE = "share", "a fixed share of the items for people"


MAX_SLOTS = 5
# Refused to someone who answered an item several people decide, once its answers stand (`may_adjudicate`).
ANSWERED_CANNOT_ADJUDICATE = "You answered this item: someone who gave no answer adjudicates it."


def answers_stand(*, slots: int, answered: int) -> bool:
    """The adjudication rule, once for every reader and writer: on an item `slots` people decide (two or more), once
    every place is answered the answers stand. Nobody answers again; the last answer decided the item if every
    answer agreed, and otherwise the item waits for its adjudication (`may_adjudicate`)."""
    return slots > 1 and answered >= slots


def may_adjudicate(*, slots: int, answered_by: Collection[int], person_id: int) -> bool:
    """Whether `person_id` may decide an item `slots` people decide (two or more) as its adjudication: only once its
    answers stand, and only someone who gave none of them."""
    return answers_stand(slots=slots, answered=len(answered_by)) and person_id not in answered_by


def default_checks(kind: str) -> CheckSet:
    """The checks of today, for a version that names none: three verdicts for conversations, three scores for drafts."""
    return CONVERSATION_DEFAULTS if kind == ItemKind.CONVERSATION else DRAFT_DEFAULTS


class CriteriaVersion(models.Model):
    """What the judge is asked to apply. Immutable once published (services refuse edits); exactly one
    published version per org and kind is active, enforced by a partial unique index."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="criteria_versions")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    number = models.PositiveIntegerField()
    rubric = models.TextField(help_text="The rubric the judge reads, check by check.")
    rules = models.JSONField(
        default=dict,
        blank=True,
        help_text="Drafts: the rules document, threshold and band included.",
    )
    checks = models.JSONField(
        default=dict,
        blank=True,
        help_text="What it asks (grading.checks.definitions.CheckSet): the checks in order, with their rules.",
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=False)
    regrade_total = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Reviews of earlier versions still live (counting or stale) when it was published: the re-grade "
        "its publishing started.",
    )
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Cloned from it."
    )
    # How many people decide an item, each blind to the others (reviewer slots). People's work, not the judge's:
    # not part of the criteria the reviews' identity names.
    slots = models.PositiveSmallIntegerField(default=1, help_text="People who decide each item `slots_for` names.")
    slots_for = models.CharField(max_length=8, choices=SlotsFor.choices, default=SlotsFor.AUDIT)
    slots_share = models.PositiveSmallIntegerField(default=0, help_text="Percent of the items for people: share.")
    # The certification target: with probability at least `certify_confidence` (1-delta), the items the machine
    # decides alone agree with people at least `certify_agreement` (1-alpha) of the time. Null: no target, the
    # fixed bands route. Routing, not what is asked: not part of the criteria the reviews' identity names.
    certify_agreement = models.FloatField(null=True, blank=True, help_text="1-alpha, e.g. 0.90; null: none.")
    certify_confidence = models.FloatField(null=True, blank=True, help_text="1-delta, e.g. 0.90.")
    # Which items go to people whatever the machine decided (grading/checks/routing.py): routing, not what is asked,
    # so not part of the criteria the reviews' identity names; frozen with the version when it is published.
    routing = models.JSONField(default=list, blank=True, help_text="[{when: thumbs_down} | {when: metadata, match}]")
    # Judge sampling: the share of each slice the judge grades, to hold spend (grading/checks/routing.py); an item
    # outside it gets a not-scorable review naming why and no judge call. Part of what the version is: published
    # with it, so a new share is a new version and the items are graded again under it.
    judge_sample = models.JSONField(default=list, blank=True, help_text="[{percent, match}]; [] grades every item")
    judge = models.CharField(
        max_length=40,
        default="default",
        help_text="The configured judge (settings.JUDGES) that grades under it; `default` is the JUDGE_* one.",
    )
    # The editor's optimistic lock: every saved edit of a draft version moves `revision` on, and a save made
    # from an older revision is refused, naming who saved in between and when.
    revision = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(null=True, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "kind", "number"], name="criteria_unique_number"),
            models.UniqueConstraint(
                fields=["org", "kind"], condition=models.Q(is_active=True), name="criteria_one_active_per_kind"
            ),
            models.CheckConstraint(
                condition=models.Q(is_active=False) | models.Q(published_at__isnull=False),
                name="criteria_active_is_published",
            ),
            models.CheckConstraint(
                condition=(models.Q(certify_agreement__isnull=True) & models.Q(certify_confidence__isnull=True))
                | models.Q(
                    certify_agreement__gt=0.5,
                    certify_agreement__lt=1,
                    certify_confidence__gt=0.5,
                    certify_confidence__lt=1,
                ),
                name="criteria_certify_target_in_range",
            ),
            models.CheckConstraint(
                condition=models.Q(slots__gte=1, slots__lte=MAX_SLOTS, slots_share__lte=100),
                name="criteria_slots_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        # A version made without checks asks what every version of its kind asked before versions defined their own.
        if not self.checks:
            self.checks = default_checks(self.kind).model_dump(mode="json")
        super().save(*args, **kwargs)

    def check_set(self) -> CheckSet:
        """The checks it asks, in order: the one place a version's stored checks are read."""
        return CheckSet.model_validate(self.checks or default_checks(self.kind).model_dump(mode="json"))

    def slots_of(self, *, review_id: int, audit: bool) -> int:
        """How many people decide one of this version's reviews for people. A share is picked by the review's id,
        so exactly that share of consecutive reviews gets the slots, whatever the machine said. The one form of the
        rule: claim next decides it for the rows in hand (reviewer/queue/reads.py)."""
        picked = {
            SlotsFor.AUDIT: audit,
            SlotsFor.PEOPLE: True,
            SlotsFor.SHARE: review_id % 100 < self.slots_share,
        }[self.slots_for]
        return self.slots if picked else 1

    def draft_rules(self) -> DraftRules:
        """The rules document of a draft version: the checks, the threshold and the band (their one home)."""
        return DraftRules.model_validate(self.rules)


class ExampleSource(models.TextChoices):
    DECISION = "decision", "a decision in the queue"
    LABEL = "label", "a label"


class CriteriaExample(models.Model):
    """A worked example of an unpublished version: an item whose human verdict on one check shows how the check is
    read. The judge reads it in the version's prompt, so it is part of the version's criteria (and fingerprint).
    Its evidence is quoted as it was when the person gave the verdict, and kept when the item changes or goes."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.CASCADE, related_name="examples")
    conversation = models.ForeignKey(
        "grading.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    draft = models.ForeignKey("grading.Draft", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    external_id = models.CharField(max_length=200, help_text="The item's, kept if the item is deleted.")
    # A check's key is up to 32 characters, and so is an answer (a category's key): grading/checks/definitions.py.
    check_name = models.CharField(max_length=32, help_text="A check of the version's, or pass_fail for a draft.")
    human_verdict = models.CharField(max_length=32, help_text="The person's answer, as a review stores it.")
    machine_verdict = models.CharField(max_length=32, blank=True, help_text="The machine's at the time, if any.")
    source = models.CharField(max_length=8, choices=ExampleSource.choices)
    fingerprint = models.CharField(max_length=80, help_text="Of the evidence the person's verdict was on.")
    evidence = models.JSONField(help_text="Conversations: the active path's messages; drafts: title and body.")
    note = models.TextField(blank=True, help_text="The person's note with the verdict.")
    explanation = models.TextField(blank=True, help_text="The criteria admin's words on how it reads the check.")
    position = models.PositiveIntegerField(help_text="The order the prompt renders examples in.")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["criteria_version", "position"], name="criteria_example_position"),
            models.UniqueConstraint(
                fields=["criteria_version", "external_id", "check_name"], name="criteria_example_once_per_check"
            ),
        ]

    def __str__(self) -> str:
        return f"example {self.external_id} {self.check_name} of {self.criteria_version}"


class TrialSource(models.TextChoices):
    """Which items a trial runs on: those with a current review (compared with it), or those with a human verdict
    on their present evidence (scored against people)."""

    CURRENT = "current", "items with a current review"
    AUDIT = "audit", "the audit sample's decisions"
    DECISIONS = "decisions", "every decision in the queue"
    LABELS = "labels", "labels"


class SpendPeriod(models.TextChoices):
    DAY = "day", "per day"
    WEEK = "week", "per week"


class SpendCap(models.Model):
    """A cap on judge spend per day or week (UTC days, weeks from Monday), for a whole org or one criteria
    version: tokens the judge reports, and cost where the judge's prices are configured. No judge call starts
    once a cap is reached."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(
        CriteriaVersion, null=True, blank=True, on_delete=models.CASCADE, related_name="spend_caps"
    )
    period = models.CharField(max_length=8, choices=SpendPeriod.choices)
    tokens = models.BigIntegerField(null=True, blank=True, help_text="Prompt and completion tokens together.")
    cost_micros = models.BigIntegerField(null=True, blank=True, help_text="In millionths of the prices' currency.")
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "criteria_version", "period"], nulls_distinct=False, name="spend_cap_once"
            ),
            models.CheckConstraint(
                condition=models.Q(tokens__isnull=False) | models.Q(cost_micros__isnull=False),
                name="spend_cap_caps_something",
            ),
        ]

    def __str__(self) -> str:
        return f"spend cap {self.period} of {self.criteria_version or self.org}"


class JudgeSpend(models.Model):
    """What the judge was paid for, per org, criteria version, judge and UTC day: booked with every review
    (trials included) in the transaction that writes it, from the usage the judge reported."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.CASCADE, related_name="+")
    judge = models.CharField(max_length=40)
    day = models.DateField()
    calls = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "criteria_version", "judge", "day"], name="judge_spend_once")
        ]
        indexes = [models.Index(fields=["org", "day"], name="judge_spend_org_day")]

    def __str__(self) -> str:
        return f"spend of {self.criteria_version} on {self.day}"


class CriteriaTrial(models.Model):
    """A trial run: a fixed-rule sample graded under an unpublished criteria version with the real judge.
    The judge calls are counted before it runs (`judge_calls`) and as it runs (`judge_calls_made`); its reviews
    are trial reviews (ReviewState.TRIAL), listed here in sample order."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.PROTECT, related_name="trials")
    sample = models.JSONField(default=list, help_text="Ids of the drafts or conversations, in sample order.")
    judge_calls = models.PositiveIntegerField(help_text="Counted before the run, and shown to whoever started it.")
    judge_calls_made = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=16, choices=TrialSource.choices, default=TrialSource.CURRENT)
    review_ids = models.JSONField(default=list)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Two admins starting at once cannot both run one: the second insert fails.
            models.UniqueConstraint(
                fields=["criteria_version"],
                condition=models.Q(finished_at__isnull=True),
                name="criteria_trial_one_running_per_version",
            )
        ]

    def __str__(self) -> str:
        return f"trial of {self.criteria_version} on {len(self.sample)} items"

    @property
    def graded(self) -> int:
        """How many of its items are graded for good: a review, or none for a reason (`review_ids`)."""
        return len(self.review_ids) - self.review_ids.count(None)

    def items_read(self) -> "CriteriaTrial":
        """The trial with its `sample` and `review_ids` read, in one query if its own read left them out (a page of
        a few of its items reads their counts and those few instead: reviewer/criteria/reads.py)."""
        if deferred := self.get_deferred_fields() & {"sample", "review_ids"}:
            self.refresh_from_db(fields=sorted(deferred))
        return self


class TrialFigures(models.Model):
    """A finished scored trial's figures as grading/criteria/scoring.py counted them, and the key of what they were
    counted from (`key`: the form of the rule and the rows the count read, `_inputs`, read before the count). Read
    only while the key still stands; counted again otherwise."""

    trial = models.OneToOneField(CriteriaTrial, primary_key=True, on_delete=models.CASCADE, related_name="+")
    key = models.TextField()
    figures = models.JSONField(help_text="Everything but the changed verdicts (scoring.py `_stored`).")
    changed = models.JSONField(default=list, help_text="The verdicts that changed, in the trial's order.")

    def __str__(self) -> str:
        return f"figures of trial {self.trial_id} at {self.key}"


class TrialFiguresItem(models.Model):
    """One item of a finished scored trial as the count of its stored figures scored it, at its position in the
    sample: written with the figures, in their transaction, and read only while their key stands, a page of
    positions at a time."""

    figures = models.ForeignKey(TrialFigures, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    row = models.JSONField(help_text="The item as scored (scoring.py `_item_json`).")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["figures", "position"], name="trial_figures_item_position")]

    def __str__(self) -> str:
        return f"item at {self.position} of the figures of trial {self.figures_id}"


class TrialItem(models.Model):
    """A trial's item, and how many times the rows a trial's figures read for it (grading/criteria/scoring.py
    `trial_score`) were written since the trial started: the item itself, its reviews, the decisions on them and
    its labels. Kept by the database, not by the writers (migration 0042's triggers): a row is added for each item
    of the sample when a trial is inserted, and `written` counts up in the same transaction as any insert, update or
    delete of those rows, by any writer, so a stored figure's key can read it instead of every such row. A write
    to an item in no trial finds no row here and writes nothing."""

    trial = models.ForeignKey(CriteriaTrial, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    item_id = models.BigIntegerField(help_text="The draft's or the conversation's id (`kind`).")
    written = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["item_id", "kind"], name="trial_item_by_item")]

    def __str__(self) -> str:
        return f"{self.kind} {self.item_id} of trial {self.trial_id}, written {self.written} times"

"""Trial runs of an unpublished criteria version: a fixed-rule sample graded under it with the real judge,
counted before it runs, shown beside the sample's current reviews.

Trial reviews carry their whole score identity and the state `trial`: they never count, are outside the one-live-
review and identity constraints, never reach the queue, a dashboard, a webhook or an evaluation export. They are
written by the record's `trial_review_record` (grading/reviews/services.py: the same INSERT as every review, with its
own state), never through `review_record`, whose business is the item's live review.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import BinaryField, Exists, F, Func, OuterRef, QuerySet, TextField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from grading.conversations.grader import (
    judge_unknown_outcome,
    not_scorable_outcome,
    path_identity,
    path_outcome,
    path_stages,
)
from grading.delivery import enqueue
from grading.drafts.gate import draft_identity, draft_outcome
from grading.judge.backends import (
    ConversationJudge,
    DraftJudge,
    UnknownJudge,
    draft_judge_named,
    judge_entry,
    judge_named,
)
from grading.models import (
    UNGRADED,
    ApiKey,
    Conversation,
    CriteriaTrial,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Label,
    Org,
    Review,
    TrialSource,
)
from grading.models.audit import audit_record
from grading.reviews.conversation_reads import conversation_path
from grading.reviews.examples import version_examples
from grading.reviews.human import human_verdicts
from grading.reviews.memory import retrieve_memory
from grading.reviews.services import ReviewOutcome, ScoreIdentity, trial_review_record
from grading.reviews.spend import SpendCapPassed, spend_blocked, spend_check
from grading.reviews.versions import CriteriaImmutable

TRIAL_DEFAULT = 5  # the most is settings.CRITERIA_TRIAL_MAX_ITEMS: each item is at least one paid judge call
# The people sources' candidates are read in pages of this many, in sample order, until K hold a human verdict.
PEOPLE_SAMPLE_PAGE = 500
# Trial tasks are sent once, with no outbox: a trial still unfinished an hour after it started has lost a task (a
# sample of 50 takes minutes), and the next start of its version closes it instead of being refused for ever.
TRIAL_LOST_AFTER = timedelta(hours=1)
TRIALS_WINDOW = timedelta(hours=1)  # CRITERIA_TRIALS_PER_ORG_PER_HOUR counts the trials started in it
# A trial item whose judge call a reached spend cap held back: it has no review (`review_ids` holds this for it).
HELD_BY_SPEND_CAP = -1


class TrialCountChanged(Exception):
    """The sample or its judge calls changed between counting and starting: nothing was started."""


class TrialRunning(Exception):
    """A trial of the version is still running (one at a time per version): nothing was started."""

    def __init__(self, trial: CriteriaTrial) -> None:
        graded = trial.graded
        super().__init__(
            f"A trial of {trial.criteria_version} is still running (started {trial.requested_at:%Y-%m-%d %H:%M} UTC, "
            f"{graded} of {len(trial.sample)} graded): one trial of a version runs at a time. Nothing was started."
        )
        self.trial = trial


class TrialsPerHourReached(Exception):
    """The org started as many trials in the last hour as CRITERIA_TRIALS_PER_ORG_PER_HOUR allows: nothing was
    started."""


@dataclass(frozen=True)
class TrialItem:
    subject: Draft | Conversation
    current: Review | None  # the item's review that counts now, to show beside the trial's
    judge_calls: int  # drafts: one; conversations: one per stage of the active path (none if not scorable)


@dataclass(frozen=True)
class TrialCount:
    version: CriteriaVersion
    items: list[TrialItem]

    @property
    def judge_calls(self) -> int:
        return sum(item.judge_calls for item in self.items)


def _sample_rank(salt: str) -> Func:
    """sha256(salt || external_id), in SQL: the audit sample's fixed rule, which ignores usage and old scores."""
    text = Concat(Value(salt), F("external_id"), output_field=TextField())
    return Func(Func(text, Value("UTF8"), function="convert_to", output_field=BinaryField()), function="sha256")


def trial_sample(
    *, version: CriteriaVersion, size: int, source: str = TrialSource.CURRENT
) -> list[Draft | Conversation]:
    """The `size` items of the version's kind in its org with the smallest sha256(SAMPLING_SALT + external_id)
    among those with something to compare with: for `current`, a scored current review; for a people source, a
    human verdict from it on their present evidence (`_people_sample`)."""
    model = Draft if version.kind == ItemKind.DRAFT else Conversation
    if source != TrialSource.CURRENT:
        return _people_sample(version, model, size, source)
    scored = Review.objects.counting().filter(org_id=version.org_id, kind=version.kind).exclude(route__in=UNGRADED)
    items: QuerySet = model.objects.filter(org_id=version.org_id, pk__in=scored.values(version.kind))
    return list(items.annotate(rank=_sample_rank(settings.SAMPLING_SALT)).order_by("rank", "pk")[:size])


def _people_sample(version: CriteriaVersion, model: type, size: int, source: str) -> list[Draft | Conversation]:
    """The `size` items, by the fixed rule, with a human verdict from `source` on their present evidence, leaving
    out the version's examples: a version is never scored on its own examples.

    The database hands the candidates (a decision or a label on the present evidence) in sample order, a page at
    a time; `human_verdicts` is the rule of which of them hold a verdict (labels split on every check give none).
    """
    field = version.kind  # the foreign key to the item, on reviews, labels and examples alike
    if source == TrialSource.LABELS:
        said = Label.objects.filter(**{field: OuterRef("pk")}, fingerprint=OuterRef("fingerprint"))
    else:
        said = Decision.objects.filter(
            **{f"review__{field}": OuterRef("pk")}, review__fingerprint=OuterRef("fingerprint")
        )
        if source == TrialSource.AUDIT:
            said = said.filter(review__audit=True)
    examples = version.examples.filter(**{f"{field}__isnull": False}).values(field)
    candidates = (
        model.objects.filter(Exists(said), org_id=version.org_id)
        .exclude(pk__in=examples)
        .annotate(rank=_sample_rank(settings.SAMPLING_SALT))
        .order_by("rank", "pk")
    )
    chosen: list[Draft | Conversation] = []
    start = 0
    while len(chosen) < size:
        page = list(candidates[start : start + PEOPLE_SAMPLE_PAGE])
        held = human_verdicts(org_id=version.org_id, kind=version.kind, source=source, item_ids=[i.pk for i in page])
        chosen += [item for item in page if item.pk in held]
        if len(page) < PEOPLE_SAMPLE_PAGE:
            break
        start += PEOPLE_SAMPLE_PAGE
    return chosen[:size]


def trial_count(
    *,
    version: CriteriaVersion,
    size: int,
    judge: ConversationJudge | None = None,
    source: str = TrialSource.CURRENT,
) -> TrialCount:
    """The sample from `source` and the judge calls grading it will make, counted before anything is spent: one
    per draft, one per stage of a conversation as `judge` (by default the version's) would stage it. Raises
    UnknownJudge when the version's judge is not configured."""
    judge_entry(version.judge)
    items = []
    for subject in trial_sample(version=version, size=size, source=source):
        if isinstance(subject, Draft):
            calls = 1
        else:
            state = conversation_path(subject)
            judge = judge or judge_named(version.judge)
            calls = 0 if state.not_scorable_reason else len(path_stages(state.path, version, judge)[1])
        current = Review.objects.counting().filter(**{version.kind: subject}).select_related("criteria_version").first()
        items.append(TrialItem(subject=subject, current=current, judge_calls=calls))
    return TrialCount(version=version, items=items)


def criteria_trial_start(
    *,
    version: CriteriaVersion,
    size: int,
    counted_calls: int,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    judge: ConversationJudge | None = None,
    source: str = TrialSource.CURRENT,
) -> CriteriaTrial:
    """Start a trial of `version` on `size` items from `source`, if the judge calls are still the `counted_calls`
    the admin read (counted again as `trial_count` counts them, with the same `judge`), no trial of the version is
    running and the org has started fewer than CRITERIA_TRIALS_PER_ORG_PER_HOUR in the last hour.

    1. Refuse early, before counting, when a limit is already reached (the checks read, nothing is locked).
    2. Count the sample's judge calls again; refuse when they changed, and when their estimated tokens or cost
       would pass a spend cap of the org or the version, or one is reached (SpendCapPassed).
    3. In one transaction holding the org's row: close the version's lost trial (`TRIAL_LOST_AFTER`), check both
       limits again, and create the trial. Starts in one org queue on that lock, so each counts the trials the
       others committed; the constraint `criteria_trial_one_running_per_version` holds even without it.

    One task per item goes to the judge queue after commit, so the request never waits on the judge and a slow
    judge holds no single task for the whole sample.
    """
    if version.published_at is not None:
        raise CriteriaImmutable(f"{version} is published: a trial runs under a version not yet published")
    _trial_limits_check(version, timezone.now())
    count = trial_count(version=version, size=size, judge=judge, source=source)
    if count.judge_calls != counted_calls:
        raise TrialCountChanged(
            f"The sample changed since it was counted: it now takes {count.judge_calls} judge calls, not "
            f"{counted_calls}. Nothing was started; read the new count."
        )
    if passed := spend_check(version=version, calls=count.judge_calls).warnings:
        raise SpendCapPassed(passed)
    with transaction.atomic():
        # FOR NO KEY UPDATE: the rows that reference the org (KEY SHARE) are written on meanwhile.
        Org.objects.select_for_update(no_key=True).filter(pk=version.org_id).first()
        now = timezone.now()
        CriteriaTrial.objects.filter(
            criteria_version=version, finished_at__isnull=True, requested_at__lte=now - TRIAL_LOST_AFTER
        ).update(finished_at=now)
        _trial_limits_check(version, now)
        trial = CriteriaTrial.objects.create(
            org_id=version.org_id,
            criteria_version=version,
            sample=[item.subject.pk for item in count.items],
            judge_calls=count.judge_calls,
            review_ids=[None] * len(count.items),
            requested_by=actor if actor is not None and actor.is_authenticated else None,
            source=source,
        )
        if not count.items:
            trial.finished_at = timezone.now()
            trial.save(update_fields=["finished_at"])
        audit_record(
            action="criteria.trial",
            org=version.org,
            actor=actor,
            api_key=api_key,
            target=version,
            detail={"trial": trial.pk, "items": len(count.items), "judge_calls": count.judge_calls, "source": source},
        )
        transaction.on_commit(lambda: enqueue.criteria_trial(trial_id=trial.pk, items=len(count.items)))
    return trial


def _trial_limits_check(version: CriteriaVersion, now: datetime) -> None:
    """Raise TrialRunning or TrialsPerHourReached when a trial of `version` may not start at `now`."""
    running = (
        CriteriaTrial.objects.filter(
            criteria_version=version, finished_at__isnull=True, requested_at__gt=now - TRIAL_LOST_AFTER
        )
        .select_related("criteria_version")
        .first()
    )
    if running is not None:
        raise TrialRunning(running)
    cap = settings.CRITERIA_TRIALS_PER_ORG_PER_HOUR
    started = list(
        CriteriaTrial.objects.filter(org_id=version.org_id, requested_at__gt=now - TRIALS_WINDOW)
        .order_by("requested_at")
        .values_list("requested_at", flat=True)
    )
    if len(started) >= cap:
        next_start = started[len(started) - cap] + TRIALS_WINDOW
        raise TrialsPerHourReached(
            f"This org started {len(started)} trials in the last hour, the most CRITERIA_TRIALS_PER_ORG_PER_HOUR "
            f"allows ({cap}); the next can start at {next_start:%H:%M} UTC. Nothing was started."
        )


def trial_item_grade(
    *,
    trial_id: int,
    index: int,
    draft_judge: DraftJudge | None = None,
    conversation_judge: ConversationJudge | None = None,
) -> Review | None:
    """Grade item `index` of a trial under the trial's version and record it as a trial review.

    1. A task delivered twice finds the item's review recorded and returns it: the judge is not paid twice.
    2. Grade as the gate or the conversation grader would, but under the trial's version, outside any
       transaction; an item gone since the count is skipped.
    3. In one short transaction: write the trial review, record it on the trial with the calls made, and close
       the trial when its last item is in.
    """
    trial = CriteriaTrial.objects.select_related("criteria_version__org").filter(pk=trial_id).first()
    if trial is None or not 0 <= index < len(trial.sample):
        return None
    if trial.review_ids[index] is not None:
        return Review.objects.filter(pk=trial.review_ids[index]).first()
    version = trial.criteria_version
    started_at = timezone.now()
    # No judge call past a spend cap: the item is closed as held, with no review, so the trial ends, never hangs.
    held = spend_blocked(version.org_id, version) is not None
    if held:
        graded = None
    elif version.kind == ItemKind.DRAFT:
        graded = _draft_trial(version, trial.sample[index], draft_judge or _version_judge(draft_judge_named, version))
    else:
        judge = conversation_judge or _version_judge(judge_named, version)
        graded = _conversation_trial(version, trial.sample[index], judge)
    with transaction.atomic():
        locked = CriteriaTrial.objects.select_for_update().get(pk=trial_id)
        if locked.review_ids[index] is not None:  # another delivery of this task got there first
            return Review.objects.filter(pk=locked.review_ids[index]).first()
        review = None
        # An erasure rewrites the trials naming its items under their lock before erasing (grading/erasure): an
        # item erased while it was judged reads 0 here, and its trial review is not written.
        if locked.sample[index] != trial.sample[index]:
            graded = None
        if graded is not None:
            subject, identity, outcome, calls = graded
            review = trial_review_record(subject=subject, identity=identity, outcome=outcome, started_at=started_at)
            locked.judge_calls_made += calls
        locked.review_ids[index] = review.pk if review else HELD_BY_SPEND_CAP if held else 0  # 0: the item was gone
        if all(review_id is not None for review_id in locked.review_ids):
            locked.finished_at = timezone.now()
        locked.save(update_fields=["review_ids", "judge_calls_made", "finished_at"])
    return review


def _version_judge(build, version: CriteriaVersion):
    """The version's judge as `build` (judge_named, draft_judge_named) makes it, or None when it is no longer
    configured (removed from JUDGES_FILE since the trial started): the item's trial review is then an error."""
    try:
        return build(version.judge)
    except UnknownJudge:
        return None


def _draft_trial(
    version: CriteriaVersion, draft_id: int, judge: DraftJudge | None
) -> tuple[Draft, ScoreIdentity, ReviewOutcome, int] | None:
    """The draft graded under the version (its identity, its outcome, the judge calls made); None when it is gone."""
    draft = Draft.objects.select_related("org").filter(pk=draft_id, org_id=version.org_id).first()
    if draft is None:
        return None
    memory = retrieve_memory(org=draft.org, text=f"{draft.title}\n{draft.body}")
    examples = version_examples(version)  # read once: the version may be edited while its trial runs
    identity = draft_identity(draft, version, memory, judge, examples)
    if judge is None:
        return draft, identity, judge_unknown_outcome(UnknownJudge(version.judge)), 0
    outcome = draft_outcome(draft=draft, criteria=version, memory=memory, judge=judge, examples=examples)
    return draft, identity, outcome, 1


def _conversation_trial(
    version: CriteriaVersion, conversation_id: int, judge: ConversationJudge | None
) -> tuple[Conversation, ScoreIdentity, ReviewOutcome, int] | None:
    conversation = Conversation.objects.filter(pk=conversation_id, org_id=version.org_id).first()
    if conversation is None:
        return None
    state = conversation_path(conversation)
    examples = version_examples(version)  # read once: the version may be edited while its trial runs
    identity = path_identity(state, version, judge, examples)
    if judge is None:
        return conversation, identity, judge_unknown_outcome(UnknownJudge(version.judge)), 0
    if state.not_scorable_reason:
        return conversation, identity, not_scorable_outcome(state.not_scorable_reason), 0
    outcome = path_outcome(state.path, version, judge, examples)
    return conversation, identity, outcome, outcome.stages


def trial_results(
    trial: CriteriaTrial,
) -> list[tuple[Draft | Conversation | None, Review | None, Review | None, str]]:
    """Per sample item, in sample order: the item, its current review, its trial review (None until graded) and,
    when it has none for good, why."""
    trial = trial.items_read()
    model = Draft if trial.criteria_version.kind == ItemKind.DRAFT else Conversation
    subjects = model.objects.in_bulk(trial.sample)
    reviews = Review.objects.select_related("criteria_version").in_bulk([r for r in trial.review_ids if r])
    field = trial.criteria_version.kind
    current = {
        getattr(review, f"{field}_id"): review
        for review in Review.objects.counting()
        .filter(**{f"{field}_id__in": trial.sample})
        .select_related("criteria_version")
    }
    return [
        (subjects.get(item_id), current.get(item_id), reviews.get(review_id) if review_id else None, _why(review_id))
        for item_id, review_id in zip(trial.sample, trial.review_ids, strict=True)
    ]


def _why(review_id: int | None) -> str:
    """Why a graded-for-good trial item has no review: `review_ids` holds 0 or HELD_BY_SPEND_CAP for it."""
    if review_id == HELD_BY_SPEND_CAP:
        return "held back by a spend cap: no judge call was made"
    return "gone before it was graded" if review_id == 0 else ""

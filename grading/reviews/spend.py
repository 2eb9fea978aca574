"""Judge spend: the ledger every review books its judge usage into (`JudgeSpend`, per org, criteria version, judge
and UTC day), and the caps (`SpendCap`) that stop judge calls once reached.

The rule a grader and a trial ask before each judge call (`spend_blocked`): a call starts only while every cap that
applies (the org's, and the criteria version's) is not reached, spent < cap. The ledger is read when asked, so calls
already started when a cap is reached may end past it: at most one per judge thread (a conversation's stages are one
grading: once its first stage started, its later stages finish it). Periods are UTC days and ISO weeks from Monday
(grading/core/weeks.py); when one rolls over, the spent figure starts again at nothing and the next pass grades on.

Cost is counted in micros (millionths of the prices' currency) at the prices configured when the review is booked
(`settings.JUDGES[name]["price_input_per_million"]`, `["price_output_per_million"]`); a judge with no prices books
its tokens and no cost, and a cost cap never stops it.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from grading.core.errors import FieldRefused
from grading.core.weeks import monday
from grading.delivery import enqueue
from grading.models import GRADED, ApiKey, CriteriaVersion, JudgeSpend, Org, SpendCap, SpendPeriod
from grading.models.audit import audit_record
from grading.reviews.rollups import SpendEntry, judge_spend_add
from grading.reviews.sql import spend_caps_spent

# The routes of a grading the judge answered: their stages are judge calls whatever the usage reported.
ESTIMATE_DAYS = 7  # the ledger's days a mean per call is read from, for the warnings before a trial or a publish
SPEND_CAP = "spend_cap"  # why an item waits while a cap is reached
MICROS = 1_000_000  # micros in one unit of the prices' currency: costs are kept as whole micros


# --- prices and booking -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prices:
    input_per_million: float
    output_per_million: float

    def cost_micros(self, *, prompt_tokens: int, completion_tokens: int) -> int:
        # per million tokens x 1e6 micros per unit: the price per token in micros is the price per million.
        return round(prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million)


def judge_prices(judge: str) -> Prices | None:
    """The judge's configured prices per million input and output tokens, or None when either is not set."""
    configured = getattr(settings, "JUDGES", None) or {}
    entry = configured.get(judge) or {}
    price_in, price_out = entry.get("price_input_per_million"), entry.get("price_output_per_million")
    if price_in is None or price_out is None:
        return None
    return Prices(float(price_in), float(price_out))


def spend_book(entry: SpendEntry | None) -> None:
    """Book what a grading's judge was paid (`spend_entry`) into the ledger; nothing for None. A review's own write
    books it in its counters' statement instead (`Tracked.spend`, grading/reviews/rollups.py)."""
    if entry is not None:
        judge_spend_add(entry)


def spend_entry(
    *, org_id: int, version: CriteriaVersion, route: str, usage: dict, calls: int, day: date
) -> SpendEntry | None:
    """What a review books into the ledger, None for nothing.

    A review the judge answered books its stages as calls; an error or a "too long" verdict books the tokens the
    judge reported before it (a stage answered, a context refusal), and its stages as calls when it reported any.
    A call that failed with no reply reported nothing and books nothing. Reviews with no judge call book nothing.
    `usage` is the judge's token counts as the review keeps them; `calls` its stages.
    """
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    judged = route in GRADED
    if not judged and prompt + completion == 0:
        return None
    prices = judge_prices(version.judge)
    cost = prices.cost_micros(prompt_tokens=prompt, completion_tokens=completion) if prices else 0
    return SpendEntry(
        org_id=org_id,
        criteria_id=version.pk,
        judge=version.judge,
        day=day,
        calls=calls,
        prompt=prompt,
        completion=completion,
        cost=cost,
    )


def money(micros: int) -> str:
    """A cost kept in micros as people read it, in the prices' currency (settings.SPEND_CURRENCY): "1.23 USD"; a
    figure under a cent keeps the digits that say it ("0.000375 USD": one judge call), none reads as 0.00."""
    amount = Decimal(micros) / MICROS
    under_a_cent = 0 < abs(amount) < Decimal("0.01")
    figure = f"{amount:.6f}".rstrip("0") if under_a_cent else f"{amount:,.2f}"
    return f"{figure} {settings.SPEND_CURRENCY}"


def utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


# --- what was spent, and the caps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spent:
    calls: int = 0
    tokens: int = 0
    cost_micros: int = 0

    def of(self, measure: str) -> int:
        return self.tokens if measure == "tokens" else self.cost_micros


def period_start(period: str, now: datetime) -> date:
    today = utc_day(now)
    return today if period == SpendPeriod.DAY else monday(today)


def period_end(period: str, now: datetime) -> datetime:
    """When the period holding `now` rolls over: the next UTC midnight, or the next Monday's."""
    start = period_start(period, now)
    length = timedelta(days=1 if period == SpendPeriod.DAY else 7)
    return datetime.combine(start + length, time.min, tzinfo=UTC)


def _sums(ledger, since: date) -> Spent:
    totals = ledger.filter(day__gte=since).aggregate(
        calls=Sum("calls"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), cost=Sum("cost_micros")
    )
    return Spent(
        calls=totals["calls"] or 0,
        tokens=(totals["prompt"] or 0) + (totals["completion"] or 0),
        cost_micros=totals["cost"] or 0,
    )


def cap_spent(cap: SpendCap, now: datetime) -> Spent:
    """What the cap counts in its period so far: the org's whole spend, or its criteria version's."""
    ledger = JudgeSpend.objects.filter(org_id=cap.org_id)
    if cap.criteria_version_id is not None:
        ledger = ledger.filter(criteria_version_id=cap.criteria_version_id)
    return _sums(ledger, period_start(cap.period, now))


def caps_applying(org_id: int, version: CriteriaVersion | None) -> list[SpendCap]:
    """The org's caps and the version's, org caps first, days before weeks."""
    scope = Q(criteria_version__isnull=True)
    if version is not None:
        scope |= Q(criteria_version_id=version.pk)
    caps = SpendCap.objects.filter(scope, org_id=org_id).select_related("criteria_version")
    return sorted(caps, key=lambda cap: (cap.criteria_version_id is not None, cap.period != SpendPeriod.DAY))


@dataclass(frozen=True)
class Blocked:
    """A cap that is reached: which, on what measure, spent against it, and when its period rolls over."""

    cap: SpendCap
    measure: str  # tokens | cost
    spent: int
    limit: int
    resumes_at: datetime

    @property
    def scope(self) -> str:
        return "org" if self.cap.criteria_version is None else str(self.cap.criteria_version)

    def describe(self) -> str:
        return (
            f"The {self.cap.get_period_display()} spend cap of {self.scope} is reached: "
            f"{_figures(self.measure, self.spent, self.limit)}. Grading waits until the cap is raised or the period "
            "rolls over at "
            f"{self.resumes_at:%Y-%m-%d %H:%M} UTC."
        )

    def as_json(self) -> dict:
        version = self.cap.criteria_version
        return {
            "reason": SPEND_CAP,
            "cap": {
                "scope": "org" if version is None else "criteria_version",
                "criteria_version": None if version is None else {"kind": version.kind, "number": version.number},
                "period": self.cap.period,
                "measure": self.measure,
            },
            "spent": self.spent,
            "limit": self.limit,
            "resumes_at": self.resumes_at,
        }


def _reached(cap: SpendCap, spent: Spent, now: datetime) -> Blocked | None:
    for measure, limit in (("tokens", cap.tokens), ("cost", cap.cost_micros)):
        if limit is not None and spent.of(measure) >= limit:
            return Blocked(cap, measure, spent.of(measure), limit, period_end(cap.period, now))
    return None


def spend_blocked(
    org_id: int, version: CriteriaVersion | None, *, now: datetime | None = None, caps: list[tuple] | None = None
) -> Blocked | None:
    """The first cap of the org or of `version` that is reached now (UTC day, ISO week), or None: a judge call for
    an item graded under `version` may start only when None. One statement, caps and spend together; none when the
    grader read them with its item (`caps`: a conversation's `spend_caps`, `subject_to_grade`) a moment before."""
    now = now or timezone.now()
    if caps is None:
        today = utc_day(now)
        caps = spend_caps_spent(
            org_id=org_id, version_id=version.pk if version else None, today=today, week_start=monday(today)
        )
    for cap_id, version_id, period, tokens, cost, calls, spent_tokens, spent_cost in caps:
        cap = SpendCap(
            pk=cap_id, org_id=org_id, criteria_version_id=version_id, period=period, tokens=tokens, cost_micros=cost
        )
        blocked = _reached(cap, Spent(calls=calls, tokens=spent_tokens, cost_micros=spent_cost), now)
        if blocked is not None:
            return blocked
    return None


def spend_waiting(*, org_id: int, kind: str) -> Blocked | None:
    """Why an item of `kind` with no counting review waits, when it is a spend cap: the cap of the org or of its
    active version of the kind that is reached. What the API and the item pages show."""
    version = CriteriaVersion.objects.filter(org_id=org_id, kind=kind, is_active=True).first()
    return spend_blocked(org_id, version)


# --- estimates before spending: a trial's count, a publish plan ---------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    calls: int
    tokens: int | None  # None: no estimate yet (the ledger has no call of this judge in the org these 7 days)
    cost_micros: int | None

    def of(self, measure: str) -> int | None:
        return self.tokens if measure == "tokens" else self.cost_micros


@dataclass(frozen=True)
class CapWarning:
    cap: SpendCap
    measure: str
    spent: int
    estimate: int | None  # None: not estimated; the cap is already reached
    limit: int

    def describe(self) -> str:
        scope = "org" if self.cap.criteria_version is None else str(self.cap.criteria_version)
        if self.spent >= self.limit:
            period = self.cap.get_period_display()
            return f"The {period} spend cap of {scope} is reached ({_figures(self.measure, self.spent, self.limit)})."
        more = f"{self.estimate} tokens" if self.measure == "tokens" else money(self.estimate or 0)
        return (
            f"About {more} would pass the {self.cap.get_period_display()} spend cap of {scope}: "
            f"{_figures(self.measure, self.spent, self.limit).removesuffix(' tokens')} spent."
        )


def _figures(measure: str, spent: int, limit: int) -> str:
    """Spent of the limit, as people read the measure: "300 of 250 tokens", "1.20 USD of 1.00 USD"."""
    if measure == "tokens":
        return f"{spent} of {limit} tokens"
    return f"{money(spent)} of {money(limit)}"


def spend_estimate(*, org_id: int, judge: str, calls: int, now: datetime | None = None) -> Estimate:
    """What `calls` judge calls of `judge` would cost: calls x the mean tokens (and cost) per call the org's ledger
    shows for the judge over the last ESTIMATE_DAYS days; no estimate when it shows none."""
    now = now or timezone.now()
    ledger = JudgeSpend.objects.filter(org_id=org_id, judge=judge)
    spent = _sums(ledger, utc_day(now) - timedelta(days=ESTIMATE_DAYS - 1))
    if spent.calls == 0:
        return Estimate(calls, None, None)
    prices = judge_prices(judge)
    cost = round(calls * spent.cost_micros / spent.calls) if prices else None
    return Estimate(calls, round(calls * spent.tokens / spent.calls), cost)


def spend_warnings(
    *, org_id: int, version: CriteriaVersion, estimate: Estimate, now: datetime | None = None
) -> list[CapWarning]:
    """The caps of the org or `version` that the estimated spend would pass (spent + estimate > cap), or that are
    reached already."""
    now = now or timezone.now()
    warnings = []
    for cap in caps_applying(org_id, version):
        spent = cap_spent(cap, now)
        for measure, limit in (("tokens", cap.tokens), ("cost", cap.cost_micros)):
            if limit is None:
                continue
            more = estimate.of(measure)
            if spent.of(measure) >= limit or (more is not None and spent.of(measure) + more > limit):
                warnings.append(CapWarning(cap, measure, spent.of(measure), more, limit))
    return warnings


@dataclass(frozen=True)
class SpendCheck:
    estimate: Estimate
    warnings: list[CapWarning]


def spend_check(
    *, version: CriteriaVersion, calls: int, estimate: Estimate | None = None, now: datetime | None = None
) -> SpendCheck:
    """What `calls` judge calls under `version` (its judge) would spend, and the caps they would pass: the warning
    on the trial count and the publish plan. The publish plan brings its own `estimate` (PublishPlan.estimate);
    without one, the ledger's mean per call (spend_estimate)."""
    if estimate is None:
        estimate = spend_estimate(org_id=version.org_id, judge=version.judge, calls=calls, now=now)
    return SpendCheck(estimate, spend_warnings(org_id=version.org_id, version=version, estimate=estimate, now=now))


class SpendCapPassed(Exception):
    """Starting would pass a spend cap (or one is reached): nothing was started."""

    def __init__(self, warnings: list[CapWarning]) -> None:
        super().__init__(" ".join(w.describe() for w in warnings) + " Nothing was started; raise the cap first.")
        self.warnings = warnings


# --- what the spend page and GET /api/v1/spend show ---------------------------------------------------------------


@dataclass(frozen=True)
class CapSpend:
    cap: SpendCap
    spent: Spent
    blocked: Blocked | None
    resumes_at: datetime


@dataclass(frozen=True)
class LedgerLine:
    version: CriteriaVersion
    judge: str
    today: Spent
    this_week: Spent


@dataclass(frozen=True)
class SpendOverview:
    caps: list[CapSpend]
    lines: list[LedgerLine]  # this week's spend per criteria version and judge
    today: date
    week: date


def spend_overview(*, org_id: int, now: datetime | None = None) -> SpendOverview:
    """The org's caps, each with what it counts in its period, and this week's ledger per version and judge (today's
    beside it): the spend page and the API answer, the same figures."""
    now = now or timezone.now()
    today, week = utc_day(now), monday(utc_day(now))
    caps = []
    for cap in (
        SpendCap.objects.filter(org_id=org_id)
        .select_related("criteria_version", "set_by")
        .order_by("criteria_version__kind", "criteria_version__number", "period", "pk")
    ):
        spent = cap_spent(cap, now)
        caps.append(CapSpend(cap, spent, _reached(cap, spent, now), period_end(cap.period, now)))
    rows = JudgeSpend.objects.filter(org_id=org_id, day__gte=week).select_related("criteria_version")
    lines: dict[tuple[int, str], dict[str, Spent]] = {}
    versions = {}
    for row in rows.order_by("criteria_version__kind", "criteria_version__number", "judge", "day"):
        versions[row.criteria_version_id] = row.criteria_version
        line = lines.setdefault((row.criteria_version_id, row.judge), {"today": Spent(), "week": Spent()})
        booked = Spent(row.calls, row.prompt_tokens + row.completion_tokens, row.cost_micros)
        line["week"] = _plus(line["week"], booked)
        if row.day == today:
            line["today"] = _plus(line["today"], booked)
    return SpendOverview(
        caps=caps,
        lines=[LedgerLine(versions[pk], judge, v["today"], v["week"]) for (pk, judge), v in lines.items()],
        today=today,
        week=week,
    )


def _plus(a: Spent, b: Spent) -> Spent:
    return Spent(a.calls + b.calls, a.tokens + b.tokens, a.cost_micros + b.cost_micros)


# --- setting caps (a criteria admin, in the browser) --------------------------------------------------------------

CAP_MAX = 10**15  # tokens or micros: far past any real spend, and far inside a bigint


class SpendCapInvalid(FieldRefused):
    """A cap that cannot be set as given; `field` names the input. Nothing was written."""


def _limits(cap: SpendCap | None) -> dict[str, int | None]:
    return {"tokens": cap.tokens, "cost_micros": cap.cost_micros} if cap else {"tokens": None, "cost_micros": None}


def _check_limit(field: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= CAP_MAX:
        raise SpendCapInvalid(field, f"Give a whole number from 0 to {CAP_MAX}, or leave it empty.")


def spend_cap_set(
    *,
    org: Org,
    version: CriteriaVersion | None,
    period: str,
    tokens: int | None,
    cost_micros: int | None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    remove: bool = False,
) -> SpendCap | None:
    """Set (or, with `remove`, remove) the org's cap for `period`, or `version`'s; audited with the old and the new
    limits (under `actor`, the person, or `api_key`, the org's key), in one transaction. A cap raised or removed lets
    grading start again at once: a grading pass is sent after the commit (the hourly one would take the waiting items
    too, up to an hour later).
    """
    if period not in SpendPeriod.values:
        raise SpendCapInvalid("period", "Choose per day or per week.")
    if version is not None and version.org_id != org.pk:
        raise SpendCapInvalid("criteria_version", "No such criteria version in this org.")
    if not remove:
        _check_limit("tokens", tokens)
        _check_limit("cost_micros", cost_micros)
        if tokens is None and cost_micros is None:
            raise SpendCapInvalid("tokens", "Give a cap on tokens, on cost, or both (or remove the cap).")
    with transaction.atomic():
        current = SpendCap.objects.select_for_update().filter(org=org, criteria_version=version, period=period).first()
        old = _limits(current)
        if remove:
            if current is None:
                return None
            current.delete()
            cap, new = None, _limits(None)
        else:
            cap = current or SpendCap(org=org, criteria_version=version, period=period)
            cap.tokens, cap.cost_micros = tokens, cost_micros
            cap.set_by = actor if actor is not None and actor.is_authenticated else None
            cap.set_at = timezone.now()
            cap.save()
            new = _limits(cap)
        audit_record(
            action="spend.cap_removed" if remove else "spend.cap_set",
            org=org,
            actor=actor,
            api_key=api_key,
            target=version,
            detail={
                "scope": "org" if version is None else str(version),
                "period": period,
                "old": old,
                "new": new,
            },
        )
        if _loosened(old, new):
            transaction.on_commit(enqueue.grading_pass_now)
    return cap


def _loosened(old: dict[str, int | None], new: dict[str, int | None]) -> bool:
    """Whether a limit went up or away: only then can a waiting item be graded now."""
    return any(old[m] is not None and (new[m] is None or new[m] > old[m]) for m in old)


def spend_overview_json(overview: SpendOverview) -> dict:
    """GET /api/v1/spend: the spend page's figures."""

    def spent(figures: Spent) -> dict:
        return {"calls": figures.calls, "tokens": figures.tokens, "cost_micros": figures.cost_micros}

    def version_of(version: CriteriaVersion | None) -> dict | None:
        return None if version is None else {"kind": version.kind, "number": version.number}

    return {
        "today": overview.today,
        "week": overview.week,
        "caps": [
            {
                "scope": "org" if line.cap.criteria_version is None else "criteria_version",
                "criteria_version": version_of(line.cap.criteria_version),
                "period": line.cap.period,
                "tokens": line.cap.tokens,
                "cost_micros": line.cap.cost_micros,
                "spent": spent(line.spent),
                "reached": line.blocked is not None,
                "period_ends_at": line.resumes_at,
                "set_at": line.cap.set_at,
            }
            for line in overview.caps
        ],
        "spend": [
            {
                "criteria_version": version_of(line.version),
                "judge": line.judge,
                "today": spent(line.today),
                "this_week": spent(line.this_week),
            }
            for line in overview.lines
        ],
    }

"""The criteria admins' pages: versions per kind, the editor, the diff of any two versions, the preview (no judge
calls), trial runs (judge calls, counted first) and publishing (after reading the plan).

Every view asks the reads with the admin's org ids: another org's version, trial or item is a 404, and a signed-in
person without the criteria-admin role gets a 403 (`role_required`), for the pages and their htmx partials alike.
"""

from collections.abc import Iterable

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from grading.certify.reads import certificate_panel
from grading.checks.definitions import MAX_CHECKS
from grading.conversations.expected_replies import expected_replies_of
from grading.core.spreadsheets import csv_lines
from grading.criteria.impact import criteria_diff, criteria_preview, criteria_publish_planned, publish_plan
from grading.criteria.rule_preview import rules_preview
from grading.criteria.scoring import is_scored, trial_figures, trial_rows, trial_score
from grading.criteria.trials import (
    TrialCount,
    TrialCountChanged,
    TrialRunning,
    TrialsPerHourReached,
    criteria_trial_start,
    trial_count,
    trial_results,
)
from grading.dashboard.regrade import org_regrade_progress
from grading.judge.backends import UnknownJudge, judge_names
from grading.models import CriteriaTrial, CriteriaVersion, ItemKind, Org, Review, TrialSource
from grading.reviews.blind import item_blind, reviews_blind
from grading.reviews.spend import SpendCapPassed, spend_check, spend_waiting
from grading.reviews.versions import (
    CriteriaConflict,
    CriteriaImmutable,
    CriteriaInvalid,
    criteria_new_version,
    criteria_update,
)
from reviewer.access import found, org_named, role_required
from reviewer.audit.display import trail_of
from reviewer.criteria import reads
from reviewer.criteria.display import (
    certified_rows,
    checks_read,
    scored_checks,
    trial_changed_rows,
    trial_coverage,
    trial_item_rows,
)
from reviewer.criteria.forms import (
    CertifyTargetForm,
    CriteriaForm,
    DiffForm,
    NewVersionForm,
    PreviewForm,
    PublishForm,
    TrialForm,
    TrialRowsForm,
    TrialStartForm,
)
from reviewer.dashboards.display import duration, regrade_panel
from reviewer.models import Role
from reviewer.pages import bad_request

NAV = {"nav_active": "criteria"}


def _get_version_for_user(request: HttpRequest, pk: int) -> CriteriaVersion:
    return found(reads.version_for_admin(org_ids=reads.admin_org_ids(request.user), version_id=pk), "criteria version")


def _get_trial_for_user(request: HttpRequest, pk: int) -> CriteriaTrial:
    return found(reads.trial_for_admin(org_ids=reads.admin_org_ids(request.user), trial_id=pk), "trial")


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria(request: HttpRequest) -> HttpResponse:
    """Every version per org and kind, the active one marked, with the current reviews each holds."""
    org_ids = reads.admin_org_ids(request.user)
    groups = {(group.org.pk, group.kind): group for group in reads.versions_by_kind(org_ids=org_ids)}
    sections = [
        (org, [(kind, groups.get((org.pk, kind))) for kind in (ItemKind.DRAFT, ItemKind.CONVERSATION)])
        for org in Org.objects.filter(pk__in=org_ids).order_by("slug")
    ]
    return render(request, "reviewer/criteria/index.html", {"sections": sections, **NAV})


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_new(request: HttpRequest) -> HttpResponse:
    """A new unpublished version, cloned from the active one or from the version named (rolling back is moving
    forward to a copy of an old version)."""
    form = NewVersionForm(request.POST)
    if not form.is_valid():
        return bad_request(form)
    org = org_named(reads.admin_org_ids(request.user), form.cleaned_data["org"])
    source = None
    if form.cleaned_data["source"]:
        source = _get_version_for_user(request, form.cleaned_data["source"])
        if (source.org_id, source.kind) != (org.pk, form.cleaned_data["kind"]):
            raise Http404("No such version of that kind.")
    version = criteria_new_version(org=org, kind=form.cleaned_data["kind"], author=request.user, source=source)
    origin = f"v{version.based_on.number}" if version.based_on else "the active version"
    messages.success(request, f"Created {version} from {origin}. It is yours to edit until it is published.")
    return redirect("criteria_version", pk=version.pk)


@require_http_methods(["GET", "POST"])
@role_required(Role.CRITERIA_ADMIN)
def criteria_version(request: HttpRequest, pk: int) -> HttpResponse:
    """A version: read-only once published; an unpublished one is edited here (POST saves)."""
    version = _get_version_for_user(request, pk)
    if request.method == "GET":
        form = None if version.published_at else CriteriaForm.for_version(version)
        return _render_version(request, version, form)
    if version.published_at is not None:
        return _render_version(request, version, None, refusal=f"{version} is published and cannot change.", status=409)
    form = CriteriaForm(request.POST, version=version)
    if not form.is_valid():
        return _render_version(request, version, form, status=400)
    try:
        revision = form.cleaned_data["revision"]
        saved = criteria_update(version=version, actor=request.user, revision=revision, **form.edit())
    except CriteriaImmutable as refused:  # published by someone else while this form was open
        version.refresh_from_db()
        return _render_version(request, version, None, refusal=str(refused), status=409)
    except CriteriaConflict as conflict:
        # Their save is kept. The editor keeps what this admin typed, now based on the saved revision: saving again
        # is a choice made knowing whose changes it replaces.
        version.refresh_from_db()
        typed = request.POST.copy()
        typed["revision"] = str(version.revision)
        form = CriteriaForm(typed, version=version)
        form.is_valid()
        refusal = (
            f"{conflict} Save again to replace their changes with yours, or open v{version.number} again to start "
            "from theirs."
        )
        return _render_version(request, version, form, refusal=refusal, status=409)
    except CriteriaInvalid as invalid:  # what the form could not know: worked examples added meanwhile
        form.add_service_errors(invalid.errors)
        return _render_version(request, version, form, status=400)
    messages.success(request, f"Saved {saved} (revision {saved.revision}).")
    return redirect("criteria_version", pk=saved.pk)


def _render_version(
    request: HttpRequest, version: CriteriaVersion, form: CriteriaForm | None, *, refusal: str = "", status: int = 200
) -> HttpResponse:
    certification = certificate_panel(version)
    context = {
        "version": version,
        "form": form,
        "refusal": refusal,
        "rules": version.draft_rules() if version.kind == ItemKind.DRAFT else None,
        "checks_read": checks_read(version.check_set()),
        "checks_max": MAX_CHECKS,
        "others": reads.versions_of_kind(version),
        "trials": reads.trials_of(version),
        "regrade": _regrade_panel(version) if version.is_active else None,
        "certification": certification,
        "certified_rows": certified_rows(certification),
        "certify_form": CertifyTargetForm(initial=_target_initial(version)),
        **reads.examples_context(version),
        **NAV,
    }
    return render(request, "reviewer/criteria/version.html", context, status=status)


def _target_initial(version: CriteriaVersion) -> dict:
    if version.certify_agreement is None:
        return {"agreement": 90, "confidence": 90}
    return {"agreement": round(version.certify_agreement * 100), "confidence": round(version.certify_confidence * 100)}


def _time_left(trial: CriteriaTrial, graded: int, total: int) -> str:
    """At the rate since the trial started."""
    elapsed = (timezone.now() - trial.requested_at).total_seconds()
    if not graded or elapsed <= 0:
        return "time left not known yet"
    return f"about {duration((total - graded) * elapsed / graded)} left"


def _regrade_panel(version: CriteriaVersion) -> dict:
    progress = [p.as_json() for p in org_regrade_progress(version.org) if p.kind == version.kind]
    return regrade_panel(progress, org_slug=version.org.slug, kind=version.kind)


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_diff_view(request: HttpRequest) -> HttpResponse:
    """Any two versions of one kind side by side."""
    form = DiffForm(request.GET)
    if not form.is_valid():
        return bad_request(form)
    old = _get_version_for_user(request, form.cleaned_data["old"])
    new = _get_version_for_user(request, form.cleaned_data["new"])
    if (old.org_id, old.kind) != (new.org_id, new.kind):
        raise Http404("Versions compare within one org and kind.")
    context = {"diff": criteria_diff(old=old, new=new), "versions": reads.versions_of_kind(new), **NAV}
    return render(request, "reviewer/criteria/diff.html", context)


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_preview_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The version's deterministic checks over the org's last N drafts (a conversation version's: the rules of its
    checks over the last N conversations), against their current reviews. No judge calls; nothing is written."""
    version = _get_version_for_user(request, pk)
    if version.kind == ItemKind.CONVERSATION:
        form, run, template = PreviewForm(request.GET or None, item="conversations"), rules_preview, "rules_preview"
    else:
        form, run, template = PreviewForm(request.GET or None), criteria_preview, "preview"
    template = f"reviewer/criteria/{template}.html"
    preview = None
    if form.is_bound:
        if not form.is_valid():
            return render(request, template, {"version": version, "form": form, **NAV}, status=400)
        preview = run(version=version, limit=form.cleaned_data["n"])
    blind_reviews = _blind_reviews(row.review for row in preview.rows) if preview else set()
    context = {"version": version, "form": form, "preview": preview, "blind_reviews": blind_reviews, **NAV}
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
@role_required(Role.CRITERIA_ADMIN)
def criteria_trial(request: HttpRequest, pk: int) -> HttpResponse:
    """GET counts the judge calls a trial of K items will make; POST starts it, if the count still holds."""
    version = _get_version_for_user(request, pk)
    if version.judge not in judge_names():  # a trial under it could only fail: say so before counting anything
        refusal = f"{UnknownJudge(version.judge)} Choose a configured judge in the editor first."
        return _render_trial_count(request, version, TrialForm(), None, refusal=refusal, status=409)
    if request.method == "GET":
        form = TrialForm(request.GET or None)
        count = _count(version, form) if form.is_valid() else None
        status = 400 if form.is_bound and not form.is_valid() else 200
        return _render_trial_count(request, version, form, count, status=status)
    form = TrialStartForm(request.POST)
    if not form.is_valid():
        return _render_trial_count(request, version, form, None, status=400)
    try:
        trial = criteria_trial_start(
            version=version, size=form.cleaned_data["k"], counted_calls=form.cleaned_data["counted_calls"],
            actor=request.user, source=form.cleaned_data["source"],
        )  # fmt: skip
    except (CriteriaImmutable, TrialCountChanged) as refused:
        count = _count(version, form)
        return _render_trial_count(request, version, TrialForm(request.POST), count, refusal=str(refused), status=409)
    except TrialRunning as refused:
        context = {"refusal": str(refused), "running": refused.trial}
        return _render_trial_count(request, version, TrialForm(request.POST), None, status=409, **context)
    except TrialsPerHourReached as refused:
        return _render_trial_count(request, version, TrialForm(request.POST), None, refusal=str(refused), status=429)
    except SpendCapPassed as refused:
        count = _count(version, form)
        return _render_trial_count(request, version, TrialForm(request.POST), count, refusal=str(refused), status=409)
    messages.success(request, f"Trial started: {trial.judge_calls} judge calls on {len(trial.sample)} items.")
    return redirect("criteria_trial_detail", pk=trial.pk)


def _count(version: CriteriaVersion, form: TrialForm) -> TrialCount:
    return trial_count(version=version, size=form.cleaned_data["k"], source=form.cleaned_data["source"])


def _render_trial_count(
    request, version, form, count, *, refusal: str = "", running: CriteriaTrial | None = None, status: int = 200
) -> HttpResponse:
    k = form.cleaned_data.get("k") if form.is_bound and form.is_valid() else None
    source = form.cleaned_data.get("source") if form.is_bound and form.is_valid() else TrialSource.CURRENT
    context = {
        "version": version, "form": form, "count": count, "k": k, "source": source, "refusal": refusal,
        "running": running, "spend": spend_check(version=version, calls=count.judge_calls) if count else None,
        "blind_reviews": _blind_reviews(item.current for item in count.items) if count else set(), **NAV,
    }  # fmt: skip
    return render(request, "reviewer/criteria/trial.html", context, status=status)


# A scored trial's items and its changed verdicts are shown a page of this many rows at a time (`?page=`,
# `?changed_page=`), with the figures over every item; the API's CSV holds every row. Rendering the rows was most of
# the page's time at 10,000 items (bench/README.md, bench_trials).
TRIAL_ROWS_SHOWN = 50


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_trial_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A trial's items beside their current reviews. While it runs, htmx polls the `#trial-results` partial."""
    trial = found(reads.trial_page_for_admin(org_ids=reads.admin_org_ids(request.user), trial_id=pk), "trial")
    rows = TrialRowsForm(request.GET)
    if not rows.is_valid():
        return bad_request(rows)
    page, changed_page = rows.cleaned_data["page"] or 1, rows.cleaned_data["changed_page"] or 1
    total = trial.items_total
    # Counted from its items' reviews only while some are not graded: then it is running (and recounts them all),
    # or was stopped when lost.
    graded = trial.items_read().graded if trial.items_ungraded else total
    score = trial_figures(trial, items=_rows_of(page), changed=_rows_of(changed_page)) if is_scored(trial) else None
    results = None if score else trial_results(trial)
    context = {
        "trial": trial,
        "version": trial.criteria_version,
        # Scored against people: the figures and the items as scored; else the items beside their current reviews.
        "score": score,
        "checks": scored_checks(score) if score else [],
        "coverage": trial_coverage(score) if score else None,
        # A page of each list; every row is in the API's CSV.
        "changed": score.changed if score else [],
        "changed_rows": trial_changed_rows(score.changed, trial.criteria_version.kind) if score else "",
        "item_rows": trial_item_rows(score.items, trial.criteria_version.kind) if score else "",
        "items_pages": _pages(page, total, "page", changed_page) if score else None,
        "changed_pages": _pages(changed_page, score.changed_total, "changed_page", page) if score else None,
        "results": results,
        "blind_reviews": _blind_reviews(current for _, current, _, _ in results or ()),
        "graded": graded,
        "items_total": total,
        "time_left": None if trial.finished_at else _time_left(trial, graded, total),
        **NAV,
    }
    template = "reviewer/criteria/trial_detail.html"
    if request.htmx and request.htmx.target == "trial-results":
        template += "#trial-results"
    return render(request, template, context)


def _rows_of(page: int) -> range:
    return range((page - 1) * TRIAL_ROWS_SHOWN, page * TRIAL_ROWS_SHOWN)


def _pages(page: int, total: int, name: str, other_page: int) -> dict:
    """One list's page: which rows of how many it shows, and the query strings of the pages before and after (the
    other list's page kept)."""
    other = "changed_page" if name == "page" else "page"
    last = max(1, -(-total // TRIAL_ROWS_SHOWN))

    def query(number: int) -> str:
        return f"?{name}={number}&{other}={other_page}"

    rows = _rows_of(page)
    return {
        "page": page, "last": last, "total": total, "first_row": rows.start + 1,
        "last_row": min(rows.stop, total), "previous": query(page - 1) if page > 1 else None,
        "next": query(page + 1) if page < last else None,
    }  # fmt: skip


def _blind_reviews(reviews: Iterable[Review | None]) -> set[int]:
    """Of these current reviews, those of items people decide blind: the pages show nothing the machine said of
    such an item (grading/reviews/blind.py)."""
    blind = reviews_blind([review for review in reviews if review is not None])
    return {review_id for review_id, hidden in blind.items() if hidden.verdicts}


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_trial_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """A trial's items, one row each, as the API's `?format=csv` gives them: for people signed in."""
    trial = _get_trial_for_user(request, pk)
    response = HttpResponse("".join(csv_lines(trial_rows(trial_score(trial)))), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="trial-{trial.pk}.csv"'
    return response


@require_http_methods(["GET", "POST"])
@role_required(Role.CRITERIA_ADMIN)
def criteria_publish(request: HttpRequest, pk: int) -> HttpResponse:
    """GET shows the plan; POST publishes as planned (refused if another version was published since)."""
    version = _get_version_for_user(request, pk)
    if version.published_at is not None:
        messages.info(request, f"{version} is already published.")
        return redirect("criteria_version", pk=version.pk)
    if request.method == "GET":
        return _render_plan(request, version, None)
    form = PublishForm(request.POST)
    if not form.is_valid():
        return _render_plan(request, version, form, status=400)
    try:
        published, regrade = criteria_publish_planned(
            version=version, actor=request.user, plan_active_id=form.cleaned_data["plan_active"],
            regrade_now=form.cleaned_data["regrade_now"],
        )  # fmt: skip
    except (CriteriaConflict, CriteriaImmutable, UnknownJudge) as refused:
        return _render_plan(request, version, None, refusal=str(refused), status=409)
    note = f"Published {published}: it is active; every {published.kind} review under the one before stopped counting."
    if regrade is not None and regrade.run is not None:
        enqueued = regrade.run.enqueued
        note += f" A grading pass enqueued {enqueued} item{'' if enqueued == 1 else 's'}; {regrade.run.backlog} wait."
    else:
        note += " The next hourly grading pass re-grades them."
    messages.success(request, note)
    return redirect("criteria_version", pk=published.pk)


def _render_plan(request, version, form, *, refusal: str = "", status: int = 200) -> HttpResponse:
    plan = publish_plan(version=version)
    form = form or PublishForm(initial={"plan_active": plan.active.pk if plan.active else None})
    spend = spend_check(version=version, calls=plan.judge_calls, estimate=plan.estimate)  # the plan's one estimate
    context = {"version": version, "plan": plan, "form": form, "refusal": refusal, "spend": spend, **NAV}
    return render(request, "reviewer/criteria/publish.html", context, status=status)


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_item(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """A draft or conversation as the criteria pages link it: what it is and every review of it, the one that
    counts, history and trial reviews, each under its criteria version."""
    if kind not in ItemKind.values:
        raise Http404("No such kind.")
    item = found(reads.item_for_admin(org_ids=reads.admin_org_ids(request.user), kind=kind, item_id=pk), "item")
    reviews = reads.item_reviews(item)
    current = next((r for r in reviews if r.counts_now), None)
    waiting = spend_waiting(org_id=item.org_id, kind=kind) if current is None else None
    # Blind review: while people decide an audit item, no verdict of the machine on it is shown (nor the examples'
    # targets, which read the people's verdicts).
    blind = item_blind(kind, item.pk).verdicts
    context = {
        "item": item, "kind": kind, "reviews": reviews, "current": current, "waiting": waiting, "blind": blind, **NAV
    }  # fmt: skip
    context["targets"] = None if blind else reads.example_targets(request.user, item)
    context["trail"] = trail_of(request.user, item)
    if kind == ItemKind.CONVERSATION:  # blind as answers are, like the trail
        context["expected_replies"] = expected_replies_of(item, reader_id=request.user.pk)
    return render(request, "reviewer/criteria/item.html", context)

"""The queue's set-up pages (/setup/): an org's escalation (whom it mails, when it warns), assignment rules (added
last or in place of another, moved ahead of or behind a neighbour, removed), pools (who is in each, their names), and
service-level targets, listed in the order they decide, added last or
ahead of another, given another duration, moved ahead of or behind a neighbour, removed. Org admins set up their
orgs, and leads the orgs they lead whole (a lead of part of an org would change when the rest of it is due: a 403,
as for anyone else).

Every change goes through the service its command uses (`manage.py targets`: grading/management/service_targets.py;
`manage.py assign`: reviewer/setup/pools.py and rules.py; `manage.py escalation`: reviewer/setup/escalations.py), so
it is refused and audited (with the person as actor) exactly as the command's, and a target's re-dates the waiting
items as the command's does. A bad form or a refused change is a 400 (or 409) that says what to correct, at the top
and at the field, and changes nothing; another org's id is a 404."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from grading.management import selectors
from grading.management.options import ChangeRefused, duration_text
from grading.management.service_targets import (
    minutes_within,
    target_insert,
    target_minutes_set,
    target_move,
    target_remove,
    target_set,
    target_text,
)
from grading.models import Org
from grading.reviews.targets import targets_of
from reviewer.access import org_named, people_of, reaches_in, role_required, setup_org_ids
from reviewer.models import AssignmentRule, Pool, Role
from reviewer.pages import bad_request, org_form_page, refused_at
from reviewer.queue.assignments import QUEUE_ROLES
from reviewer.queue.reads import applications_known, applications_unknown
from reviewer.setup.escalations import (
    escalation_of,
    escalation_remove,
    escalation_set,
    settings_dict,
    settings_text,
    warn_minutes_checked,
)
from reviewer.setup.forms import (
    EARLIER,
    HOURS,
    EscalationForm,
    OrgForm,
    PoolForm,
    PoolRemoveForm,
    PoolRenameForm,
    RuleForm,
    TargetAtForm,
    TargetChangeForm,
    TargetForm,
    TargetMoveForm,
)
from reviewer.setup.pools import pool_name, pool_remove, pool_rename, pool_set
from reviewer.setup.rules import rule_add, rule_fields, rule_move, rule_remove, rule_text

SETUP_ROLES = (Role.LEAD, Role.ORG_ADMIN)


def _org_ids(request: HttpRequest) -> list[int]:
    org_ids = setup_org_ids(request.user)
    if not org_ids:
        raise PermissionDenied("A lead of part of an org does not set up its queue: ask an org admin.")
    return org_ids


def _refused_at(form: forms.Form, refusal: ChangeRefused, *, on_page: dict[str, str] | None = None) -> None:
    """The refusal on the field it names (`on_page`: where this page shows a field the service calls otherwise), or
    on the form as a whole when the page has no such field; the page lists it at the top too."""
    refused_at(form, (on_page or {}).get(refusal.field, refusal.field), refusal.said())


def _row_change(
    request: HttpRequest,
    form_class: type[forms.Form],
    change: Callable[[Org, dict], str],
    rendered: Callable[..., HttpResponse],
    *,
    page: str,
) -> HttpResponse:
    """A change posted from a row's buttons on a set-up page (a removal, a move): the org's, through its service
    (`change` says what it did); a refusal re-renders the page saying why (409), nothing written."""
    org_ids, form, org = _row_form(request, form_class)
    if org is None:
        return bad_request(form)
    try:
        outcome = change(org, form.cleaned_data)
    except ChangeRefused as refusal:
        return rendered(request, org_ids, refusal=refusal.said(), status=409)
    return _done(request, outcome, org, page=page)


def _row_form(
    request: HttpRequest, form_class: type[forms.Form], *, filled: set[str] | None = None
) -> tuple[list[int], forms.Form, Org | None]:
    """A form posted from a row of a set-up page, checked: the person's orgs, the form, and the org it names. No org
    when a field the page fills itself (`filled`: ids, choices; by default all of them) is wrong, which only a
    hand-made request gets wrong (`bad_request`); what the person typed keeps its errors on the form."""
    org_ids = _org_ids(request)
    form = form_class(request.POST)
    if not form.is_valid() and (filled is None or filled & set(form.errors)):
        return org_ids, form, None
    return org_ids, form, org_named(org_ids, form.cleaned_data["org"])


def _done(request: HttpRequest, outcome: str, org: Org, *, page: str, warnings: Sequence[str] = ()) -> HttpResponse:
    """Back to the set-up page at the org's card, saying what the change did (and what it advises)."""
    messages.success(request, outcome)
    for warning in warnings:
        messages.warning(request, warning)
    return redirect(f"{reverse(page)}#org-{org.pk}")


def _orgs(org_ids: list[int]) -> QuerySet[Org]:
    """The orgs the person sets up, a card each, in the order every set-up page lists them."""
    return Org.objects.filter(pk__in=org_ids).order_by("slug")


def _on_card(form: forms.Form | None, org: Org) -> forms.Form | None:
    """The form that did not pass, on its own org's card (with what was typed); None on the other orgs'."""
    return form if form is not None and form.data.get("org") == str(org.pk) else None


def _setup_page(
    request: HttpRequest, page: str, orgs: list[dict], *, form: forms.Form | None, refusal: str, status: int, **more
) -> HttpResponse:
    """A set-up page: its orgs' cards, the form that did not pass (its errors listed at the top too), and a refusal."""
    context = {"orgs": orgs, "form": form, "refusal": refusal, "nav_active": "setup_targets", **more}
    return render(request, f"reviewer/setup/{page}.html", context, status=status)


def _choices(form_class: type[TargetForm | RuleForm]) -> dict[str, list]:
    """What a target or rule may pick, for the page's selects."""
    return {"kinds": form_class.base_fields["kind"].choices, "reasons": form_class.base_fields["reason"].choices}


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def setup_targets(request: HttpRequest) -> HttpResponse:
    """GET lists each org's targets in the order they decide; POST adds one, after the last or ahead of another."""
    return org_form_page(request, _org_ids(request), TargetForm, _render_targets, _target_add)


def _target_add(request: HttpRequest, org_ids: list[int], form: TargetForm, org: Org) -> HttpResponse:
    data = form.cleaned_data
    application = _application_known(form, org)
    fields = None
    try:
        fields = selectors.fields(
            {"kind": data["kind"], "application": application or None, "reason": data["reason"]}, what="target"
        )
    except ChangeRefused as refusal:
        _refused_at(form, refusal)
    minutes = _minutes(form)
    if form.errors:
        return _render_targets(request, org_ids, form=form, status=400)
    fields |= {"minutes": minutes}
    ahead_of = data["ahead_of"]
    try:
        if ahead_of is None:
            outcome = target_set(org=org, fields=fields, position=None, replace=False, actor=request.user)
        else:
            outcome = target_insert(org=org, fields=fields, ahead_of=ahead_of, actor=request.user)
    except ChangeRefused as refusal:
        _refused_at(form, refusal, on_page=_TARGET_FIELDS)
        return _render_targets(request, org_ids, form=form, status=409)
    return _done(request, outcome, org, page="setup_targets")


def _application_known(form: TargetForm | RuleForm, org: Org) -> str:
    """The form's application (blank: any), refused at the field unless the org knows it (`applications_known`, the
    list its select offers): a typo would make a target or rule that picks nothing. Asked here so the refusal comes
    with the form's others in one round; `rule_fields` asks it again of a rule, for `manage.py assign rule` too (the
    targets' command is grading's, which knows no memberships, and takes any name)."""
    application = form.cleaned_data["application"].strip()
    if application and (refusal := applications_unknown(org, [application])):
        form.add_error("application", refusal)
    return application


# Where the targets page shows what the service names otherwise: a duration is typed in `within` (with its unit), a
# new target's place in `ahead_of`.
_TARGET_FIELDS = {"minutes": "within", "hours": "within", "position": "ahead_of"}


def _minutes(form: TargetForm | TargetChangeForm) -> int | None:
    """The form's duration in minutes, checked by the service; None, with the refusal at the field, when refused."""
    within, hours = form.cleaned_data["within"], form.cleaned_data["unit"] == HOURS
    try:
        return minutes_within(minutes=None if hours else within, hours=within if hours else None)
    except ChangeRefused as refusal:
        _refused_at(form, refusal, on_page=_TARGET_FIELDS)
        return None


@require_POST
@role_required(*SETUP_ROLES)
def setup_target_change(request: HttpRequest) -> HttpResponse:
    """Gives a target another duration in place (as the command's `set --position N --replace` with what it picks)."""
    org_ids, form, org = _row_form(request, TargetChangeForm, filled={"org", "position"})
    if org is None:
        return bad_request(form)
    minutes = None if form.errors else _minutes(form)
    if minutes is None:
        return _render_targets(request, org_ids, form=form, status=400)
    position = form.cleaned_data["position"]
    try:
        outcome = target_minutes_set(org=org, position=position, minutes=minutes, actor=request.user)
    except ChangeRefused as refusal:
        return _render_targets(request, org_ids, refusal=refusal.said(), status=409)
    return _done(request, outcome, org, page="setup_targets")


def _render_targets(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: TargetForm | TargetChangeForm | None = None,
    refusal: str = "",
    status: int = 200,
) -> HttpResponse:
    orgs = [
        {
            "org": org,
            "targets": [
                {"target": target, "text": target_text(target), "within": duration_text(target.minutes)}
                for target in targets_of(org.pk)
            ],
            "applications": applications_known(org),
            "form": _on_card(form if isinstance(form, TargetForm) else None, org),
            # The change of a target's duration that did not pass, on its row.
            "change": _on_card(form if isinstance(form, TargetChangeForm) else None, org),
        }
        for org in _orgs(org_ids)
    ]
    return _setup_page(request, "targets", orgs, form=form, refusal=refusal, status=status, **_choices(TargetForm))


# --- pools --------------------------------------------------------------------------------------------------------


def _queue_people(org: Org) -> list[tuple[int, str]]:
    """The org's operators and leads (id, username): the only people a pool may hold."""
    reaches = reaches_in(org.pk, *QUEUE_ROLES)
    people = people_of(org.pk).filter(pk__in=list(reaches))
    return sorted(((person.pk, person.get_username()) for person in people), key=lambda pair: pair[1])


def _org_posted(request: HttpRequest, org_ids: list[int]) -> Org | None:
    """The org a set-up form names, checked against the person's (another org's is a 404); None when it names none."""
    raw = request.POST.get("org", "")
    return org_named(org_ids, int(raw)) if raw.isdigit() else None


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def setup_pools(request: HttpRequest) -> HttpResponse:
    """GET lists each org's pools and members; POST creates a pool, or sets an existing one's members to exactly
    those ticked."""
    org_ids = _org_ids(request)
    if request.method == "GET":
        return _render_pools(request, org_ids)
    org = _org_posted(request, org_ids)
    if org is None:
        return HttpResponse("Bad request: org: a whole number is required.", status=400, content_type="text/plain")
    form = PoolForm(request.POST, people=_queue_people(org))
    name = None
    if form.is_valid():
        try:
            name = pool_name(form.cleaned_data["name"])
        except ChangeRefused as refusal:
            _refused_at(form, refusal)
    if form.errors:
        return _render_pools(request, org_ids, form=form, status=400)
    members = list(people_of(org.pk).filter(pk__in=form.cleaned_data["members"]))
    try:
        outcome = pool_set(org=org, name=name, members=members, actor=request.user)
    except ChangeRefused as refusal:  # a member's queue role revoked since the page was shown
        _refused_at(form, refusal)
        return _render_pools(request, org_ids, form=form, status=409)
    return _done(request, outcome, org, page="setup_pools")


@require_POST
@role_required(*SETUP_ROLES)
def setup_pool_remove(request: HttpRequest) -> HttpResponse:
    """Deletes a pool, with the assignments and rules that name it (the answer says how many went)."""
    return _row_change(
        request,
        PoolRemoveForm,
        lambda org, data: pool_remove(org=org, name=data["name"], actor=request.user),
        _render_pools,
        page="setup_pools",
    )


@require_POST
@role_required(*SETUP_ROLES)
def setup_pool_rename(request: HttpRequest) -> HttpResponse:
    """Gives a pool another name; its members, and the assignments and rules that name it, stay with it."""
    org_ids, form, org = _row_form(request, PoolRenameForm, filled={"org", "name"})
    if org is None:
        return bad_request(form)
    to = None
    if not form.errors:
        try:
            to = pool_name(form.cleaned_data["to"], option="--to")
        except ChangeRefused as refusal:
            _refused_at(form, refusal)
    if form.errors:
        return _render_pools(request, org_ids, rename=form, status=400)
    try:
        outcome = pool_rename(org=org, name=form.cleaned_data["name"], to=to, actor=request.user)
    except ChangeRefused as refusal:  # the name taken, or the pool gone, since the page was shown
        _refused_at(form, refusal)
        return _render_pools(request, org_ids, rename=form, status=409)
    return _done(request, outcome, org, page="setup_pools")


def _render_pools(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: PoolForm | None = None,
    rename: PoolRenameForm | None = None,
    refusal: str = "",
    status: int = 200,
) -> HttpResponse:
    ticked = {int(raw) for raw in form.data.getlist("members") if raw.isdigit()} if form is not None else set()
    orgs = [
        {
            "org": org,
            "pools": [
                {"pool": pool, "member_ids": {member.pk for member in pool.members.all()}}
                for pool in Pool.objects.filter(org=org).prefetch_related("members").order_by("name")
            ],
            "people": _queue_people(org),
            "form": _on_card(form, org),
            # What the form that did not pass had ticked, ticked again.
            "ticked": ticked if _on_card(form, org) else set(),
            # The renaming that did not pass, on its pool's row.
            "rename": _on_card(rename, org),
        }
        for org in _orgs(org_ids)
    ]
    return _setup_page(request, "pools", orgs, form=form or rename, refusal=refusal, status=status)


# --- assignment rules -----------------------------------------------------------------------------------------------


def _assignees(org: Org) -> list[tuple[str, str]]:
    """Whom a rule may name: the org's pools (`pool:NAME`), then its operators and leads (`person:ID`)."""
    pools = Pool.objects.filter(org=org).order_by("name").values_list("name", flat=True)
    return [(f"pool:{name}", f"pool {name}") for name in pools] + [
        (f"person:{pk}", username) for pk, username in _queue_people(org)
    ]


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def setup_rules(request: HttpRequest) -> HttpResponse:
    """GET lists each org's assignment rules in the order they decide; POST adds one after the last."""
    return org_form_page(request, _org_ids(request), RuleForm, _render_rules, _rule_add)


# Where the rules page shows what the service names otherwise: one list of pools and people.
_RULE_FIELDS = {"person": "assignee", "pool": "assignee", "position": "replaces"}


def _rule_add(request: HttpRequest, org_ids: list[int], form: RuleForm, org: Org) -> HttpResponse:
    data = form.cleaned_data
    application = _application_known(form, org)
    kind, _, named = data["assignee"].partition(":")
    person, pool = None, None
    if kind == "person" and named.isdigit():
        person = people_of(org.pk).filter(pk=int(named)).first()
    elif kind == "pool":
        pool = named
    if person is None and pool is None:
        form.add_error("assignee", "Choose a pool or a person of the org.")
    warnings: list[str] = []
    fields = None
    if not form.errors:
        try:
            fields = rule_fields(
                org,
                selection={"kind": data["kind"], "application": application or None, "reason": data["reason"]},
                hours=data["hours"],
                person=person,
                pool=pool,
                warn=warnings.append,
            )
        except ChangeRefused as refusal:
            _refused_at(form, refusal, on_page=_RULE_FIELDS)
    if form.errors:
        return _render_rules(request, org_ids, form=form, status=400)
    # In place of a rule (as the command's `rule --position N --replace`), or after the last.
    replaces = data["replaces"]
    try:
        outcome = rule_add(org=org, position=replaces, replace=replaces is not None, fields=fields, actor=request.user)
    except ChangeRefused as refusal:  # no position left after the last
        _refused_at(form, refusal, on_page=_RULE_FIELDS)
        return _render_rules(request, org_ids, form=form, status=409)
    return _done(request, outcome, org, page="setup_rules", warnings=warnings)


def _render_rules(
    request: HttpRequest, org_ids: list[int], *, form: RuleForm | None = None, refusal: str = "", status: int = 200
) -> HttpResponse:
    orgs = [
        {
            "org": org,
            "rules": [
                {"rule": rule, "text": rule_text(rule)}
                for rule in AssignmentRule.objects.filter(org=org).select_related("person", "pool").order_by("position")
            ],
            "applications": applications_known(org),
            "assignees": _assignees(org),
            "form": _on_card(form, org),
        }
        for org in _orgs(org_ids)
    ]
    return _setup_page(request, "rules", orgs, form=form, refusal=refusal, status=status, **_choices(RuleForm))


# --- the ordered lists' rows: targets and rules -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Ordered:
    """A list the set-up pages keep in the order it decides (the first match wins), whose rows' buttons move a row
    ahead of or behind its neighbour or remove it, through the list's services."""

    move: Callable[..., str]
    remove: Callable[..., str]
    rendered: Callable[..., HttpResponse]
    page: str


# Keyed as reviewer/setup/urls.py names the list to its views.
_ORDERED = {
    "targets": _Ordered(target_move, target_remove, _render_targets, page="setup_targets"),
    "rules": _Ordered(rule_move, rule_remove, _render_rules, page="setup_rules"),
}


@require_POST
@role_required(*SETUP_ROLES)
def setup_row_move(request: HttpRequest, listed: str) -> HttpResponse:
    """Swaps a target or rule with the one before or after it: which of the two decides an item both match."""
    ordered = _ORDERED[listed]

    def move(org: Org, data: dict) -> str:
        earlier = data["direction"] == EARLIER
        return ordered.move(org=org, position=data["position"], earlier=earlier, actor=request.user)

    return _row_change(request, TargetMoveForm, move, ordered.rendered, page=ordered.page)


@require_POST
@role_required(*SETUP_ROLES)
def setup_row_remove(request: HttpRequest, listed: str) -> HttpResponse:
    ordered = _ORDERED[listed]

    def remove(org: Org, data: dict) -> str:
        return ordered.remove(org=org, position=data["position"], actor=request.user)

    return _row_change(request, TargetAtForm, remove, ordered.rendered, page=ordered.page)


# --- escalation ---------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def setup_escalation(request: HttpRequest) -> HttpResponse:
    """GET shows each org's escalation; POST creates it or changes whom it mails and when it warns."""
    return org_form_page(request, _org_ids(request), EscalationForm, _render_escalation, _escalation_set)


def _escalation_set(request: HttpRequest, org_ids: list[int], form: EscalationForm, org: Org) -> HttpResponse:
    data = form.cleaned_data
    try:
        given = {"warn_minutes": warn_minutes_checked(data["warn_minutes"])}
    except ChangeRefused as refusal:
        _refused_at(form, refusal)
        return _render_escalation(request, org_ids, form=form, status=400)
    given |= {"to_assignees": data["to_assignees"], "to_leads": data["to_leads"]}
    try:
        outcome, warning = escalation_set(org=org, given=given, actor=request.user)
    except ChangeRefused as refusal:  # it would tell nobody
        _refused_at(form, refusal)
        return _render_escalation(request, org_ids, form=form, status=400)
    return _done(request, outcome, org, page="setup_escalation", warnings=[warning] if warning else ())


@require_POST
@role_required(*SETUP_ROLES)
def setup_escalation_remove(request: HttpRequest) -> HttpResponse:
    """Stops escalating: nobody is told any more."""
    return _row_change(
        request,
        OrgForm,
        lambda org, data: escalation_remove(org=org, actor=request.user),
        _render_escalation,
        page="setup_escalation",
    )


def _render_escalation(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: EscalationForm | None = None,
    refusal: str = "",
    status: int = 200,
) -> HttpResponse:
    orgs = []
    for org in _orgs(org_ids):
        escalation = escalation_of(org)
        orgs.append(
            {
                "org": org,
                "escalation": escalation,
                "text": settings_text(settings_dict(escalation)) if escalation else "",
                "form": _on_card(form, org),
            }
        )
    return _setup_page(request, "escalation", orgs, form=form, refusal=refusal, status=status)

"""Computing certificates: from a version's calibration set under its judge, per certified key the threshold above
which the judge agrees with people at the target, with the stated probability (grading/certify/thresholds.py).

A computation that comes to something new writes a new row, so a review keeps naming the certificate it was routed
under. The refresh (beat, and after labels are imported or a target is set) recomputes every active version with a
target: the work is one read of the version's labelled reviews, bounded by the labels, not by the reviews.
"""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from grading.certify.calibration import calibration, certified_keys
from grading.certify.routing import certificate_for
from grading.certify.thresholds import CalibrationPoint, CheckCertificate, agreement_curve, certify, split_delta
from grading.delivery import enqueue
from grading.judge.backends import UnknownJudge, draft_judge_named, judge_named
from grading.models import Certificate, CriteriaVersion, ItemKind
from grading.models.audit import audit_record


@dataclass(frozen=True)
class Target:
    alpha: float  # the disagreement allowed among the items the machine decides alone
    delta: float  # the probability the guarantee may fail, over every certified key together

    @classmethod
    def of(cls, version: CriteriaVersion) -> "Target | None":
        if version.certify_agreement is None or version.certify_confidence is None:
            return None
        return cls(alpha=1 - version.certify_agreement, delta=1 - version.certify_confidence)


class TargetInvalid(ValueError):
    pass


def certify_target_set(
    *, version: CriteriaVersion, actor: AbstractBaseUser | None, agreement: float | None, confidence: float | None
) -> CriteriaVersion:
    """Set (or clear, with None for both) the version's certification target, audited, and compute its certificate
    in the background. Allowed on a published version: it changes who decides, not what is asked, so no review's
    identity moves; reviews already routed keep their route."""
    if (agreement is None) != (confidence is None):
        raise TargetInvalid("Give both the agreement and the confidence, or neither to route by the fixed bands.")
    for name, value in (("agreement", agreement), ("confidence", confidence)):
        if value is not None and not 0.5 < value < 1:
            raise TargetInvalid(f"The {name} is a share above 50% and below 100%.")
    with transaction.atomic():
        locked = CriteriaVersion.objects.select_for_update().get(pk=version.pk)
        before = {"agreement": locked.certify_agreement, "confidence": locked.certify_confidence}
        locked.certify_agreement, locked.certify_confidence = agreement, confidence
        # A grading process keeps a published version by its revision (`criteria_of`): moving it on is what makes
        # every worker route by the new target.
        locked.revision += 1
        locked.updated_at = timezone.now()
        locked.updated_by = actor if actor is not None and actor.is_authenticated else None
        locked.save(update_fields=["certify_agreement", "certify_confidence", "revision", "updated_at", "updated_by"])
        audit_record(
            action="criteria.certify_target", org=locked.org, actor=actor, target=locked,
            detail={"from": before, "to": {"agreement": agreement, "confidence": confidence}},
        )  # fmt: skip
        if agreement is not None:
            transaction.on_commit(lambda: enqueue.certificates_refresh(org_id=locked.org_id))
    return locked


def version_judge_key(version: CriteriaVersion) -> str | None:
    """The key of the judge that grades under the version now; None when its judge is not configured."""
    try:
        judge = draft_judge_named(version.judge) if version.kind == ItemKind.DRAFT else judge_named(version.judge)
    except UnknownJudge:
        return None
    return judge.identity.key


def certificate_compute(version: CriteriaVersion, *, judge_key: str) -> Certificate | None:
    """Compute and store the version's certificate under the judge for its present target (None: no target), from
    its calibration set (`certified_checks`)."""
    target = Target.of(version)
    if target is None:
        return None
    found = calibration(version, judge_key=judge_key)
    checks = {
        key: certified.as_json() | {"curve": [list(point) for point in agreement_curve(found.points[key])]}
        for key, certified in certified_checks(version, found.points, target=target).items()
    }
    last = certificate_for(version, judge_key=judge_key)
    if last is not None and (last.checks, last.labels) == (checks, found.labels):
        return last  # nothing moved: the routed reviews keep naming it
    with transaction.atomic():
        certificate = Certificate.objects.create(
            org_id=version.org_id,
            criteria_version=version,
            judge_key=judge_key,
            agreement=version.certify_agreement,
            confidence=version.certify_confidence,
            checks=checks,
            labels=found.labels,
            labelled_from=found.labelled_from,
            labelled_to=found.labelled_to,
            computed_at=timezone.now(),
        )
        if version.published_at is not None:
            # Graders keep a published version, and its certificate, by its revision (`criteria_of`,
            # `certificate_for`): moving it on is what makes every worker route by the new certificate.
            CriteriaVersion.objects.filter(pk=version.pk).update(revision=F("revision") + 1)
            version.revision = CriteriaVersion.objects.values_list("revision", flat=True).get(pk=version.pk)
    return certificate


def certified_checks(
    version: CriteriaVersion, points: dict[str, list[CalibrationPoint]], *, target: Target
) -> dict[str, CheckCertificate]:
    """Per key the version certifies (`certified_keys`), its certificate from `points` at the target: each key is
    tested at delta split among the keys, so all their guarantees hold at once with probability at least 1-delta
    (an item is decided alone only when every key it needs is certified)."""
    keys = certified_keys(version)
    delta = split_delta(target.delta, len(keys))
    return {key: certify(points.get(key, []), alpha=target.alpha, delta=delta) for key in keys}


def certificates_refresh(*, org_id: int | None = None) -> int:
    """Recompute the certificate of every active version with a target, under the judge that grades under it now;
    return how many versions were computed."""
    versions = CriteriaVersion.objects.filter(is_active=True, certify_agreement__isnull=False)
    if org_id is not None:
        versions = versions.filter(org_id=org_id)
    computed = 0
    for version in versions:
        judge_key = version_judge_key(version)
        if judge_key is not None:
            certificate_compute(version, judge_key=judge_key)
            computed += 1
    return computed

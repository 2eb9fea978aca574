"""What the criteria page shows of a version's certification: its target, and per certified key the latest
certificate's threshold, bound, coverage, the labels behind it and the curve of agreement against coverage."""

from dataclasses import dataclass

from grading.certify.calibration import certified_keys
from grading.certify.routing import certificate_for
from grading.certify.services import version_judge_key
from grading.models import Certificate, CriteriaVersion, ItemKind, Label


@dataclass(frozen=True)
class CertifiedCheck:
    key: str
    name: str
    labels: int
    disagreements: int
    threshold: float | None  # None: no threshold passes, so the machine decides nothing alone on it
    bound: float | None
    coverage: float
    more_labels: int | None
    curve: list[tuple[float, float]]  # (coverage, agreement) over the calibration items, coverage rising


@dataclass(frozen=True)
class CertificatePanel:
    agreement: float | None  # the target, 1-alpha; None: no target, the fixed bands route
    confidence: float | None
    certificate: Certificate | None
    checks: list[CertifiedCheck]

    @property
    def certified(self) -> bool:
        """The machine may decide some items alone: every certified key has a threshold."""
        return bool(self.checks) and all(check.threshold is not None for check in self.checks)


def certificate_panel(version: CriteriaVersion) -> CertificatePanel:
    judge_key = version_judge_key(version)
    certificate = None
    if version.certify_agreement is not None and judge_key is not None:
        certificate = certificate_for(version, judge_key=judge_key)
    checks = []
    if certificate is not None:
        names = certified_names(version)
        for key in certified_keys(version):
            part = certificate.checks.get(key, {})
            checks.append(
                CertifiedCheck(
                    key=key,
                    name=names.get(key, key),
                    labels=part.get("labels", 0),
                    disagreements=part.get("disagreements", 0),
                    threshold=part.get("threshold"),
                    bound=part.get("bound"),
                    coverage=part.get("coverage", 0.0),
                    more_labels=part.get("more_labels"),
                    curve=[(c, a) for c, a in part.get("curve", [])],
                )
            )
    return CertificatePanel(
        agreement=version.certify_agreement,
        confidence=version.certify_confidence,
        certificate=certificate,
        checks=checks,
    )


def certified_names(version: CriteriaVersion) -> dict[str, str]:
    """Each key the version certifies by the name a page gives it."""
    if version.kind == ItemKind.DRAFT:
        return {Label.PASS_FAIL: "the draft's verdict"}
    return {check.key: check.name for check in version.check_set().checks}


def certification_json(version: CriteriaVersion) -> dict:
    """The version's target and latest certificate, as the API gives them (the chart's curve left out)."""
    panel = certificate_panel(version)
    certificate = panel.certificate
    target = None if panel.agreement is None else {"agreement": panel.agreement, "confidence": panel.confidence}
    if certificate is None:
        return {"target": target, "certificate": None}
    return {
        "target": target,
        "certificate": {
            "id": certificate.pk,
            "computed_at": certificate.computed_at,
            "labels": certificate.labels,
            "labelled_from": certificate.labelled_from,
            "labelled_to": certificate.labelled_to,
            "certified": panel.certified,
            "checks": {
                check.key: {
                    "threshold": check.threshold,
                    "bound": check.bound,
                    "coverage": check.coverage,
                    "labels": check.labels,
                    "disagreements": check.disagreements,
                    "more_labels": check.more_labels,
                }
                for check in panel.checks
            },
        },
    }

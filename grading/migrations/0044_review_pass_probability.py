"""The judge's probability that the item passes, stored on the review (grading/judge/pass_probability.py computes
it when a review is written), and filled here for the reviews written before: the same rule as an expression of the
database's, per criteria version (its required checks), one UPDATE each (by the grading's own rule where the database
cannot hold the product). With it, the audit sample's reviews get an index of their own (the certified panel reads
their decisions per kind)."""

from django.db import DataError, migrations, models, transaction
from django.db.models import Case, ExpressionWrapper, FloatField, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import In

from grading.checks.definitions import CheckSet
from grading.core.evidence import Verdict
from grading.judge.pass_probability import item_pass_probability
from grading.models.criteria import default_checks

_ONE, _HALF = Value(1.0, output_field=FloatField()), Value(0.5, output_field=FloatField())
_UNGRADED = ("not_scorable", "error")
_BATCH = 2000


def _sure(key: str):
    return Coalesce(Cast(KeyTextTransform(key, "confidences"), FloatField()), _ONE)


def _probability(kind: str, checks: CheckSet):
    """What the certified panel computed on each review before it was stored (its `pass_probability`)."""
    if kind == "draft":
        sure = _sure("pass_fail")
        return Case(
            When(judge_passed=True, then=sure),
            When(judge_passed=False, then=_ONE - sure),
            When(route="pass", then=sure),
            When(route="fail", then=_ONE - sure),
            default=_HALF,
            output_field=FloatField(),
        )
    probability = _ONE
    for check in checks.checks:
        if not check.required:
            continue
        outcomes = {answer: check.outcome(answer) for answer in check.answers}
        answer = KeyTextTransform("verdict", KeyTransform(check.key, "checks"))
        sure = _sure(check.key)
        said = [
            When(In(answer, answers), then=value)
            for verdict, value in ((Verdict.PASS, sure), (Verdict.FAIL, _ONE - sure))
            if (answers := [answer for answer, outcome in outcomes.items() if outcome == verdict])
        ]
        factor = Case(*said, default=_HALF, output_field=FloatField()) if said else _HALF
        probability = factor if probability is _ONE else ExpressionWrapper(probability * factor, FloatField())
    return probability


def pass_probabilities_fill(criteria_version, review) -> None:
    """Fill `pass_probability` of every graded review that has none, version by version (the models given: the
    migration's, or the benchmark's, whose rows are written past the grading path)."""
    for version in criteria_version.objects.all():
        checks = CheckSet.model_validate(version.checks or default_checks(version.kind).model_dump(mode="json"))
        unfilled = review.objects.filter(criteria_version_id=version.pk, pass_probability__isnull=True).exclude(
            route__in=_UNGRADED
        )
        try:
            with transaction.atomic():
                unfilled.update(pass_probability=_probability(version.kind, checks))
        except DataError:
            # PostgreSQL refuses a product of two non-zero floats that rounds to zero (confidences below about
            # 1e-154), where Python's is 0.0: the version's reviews are then filled by the grading's own rule.
            _fill_by_the_rule(unfilled, version.kind, checks)


def _fill_by_the_rule(unfilled, kind: str, checks: CheckSet) -> None:
    batch = []
    for row in unfilled.only("route", "judge_passed", "checks", "confidences").iterator(chunk_size=_BATCH):
        row.pass_probability = item_pass_probability(
            kind=kind,
            checks=checks,
            route=row.route,
            judge_passed=row.judge_passed,
            answers=row.checks,
            confidences=row.confidences,
        )
        batch.append(row)
        if len(batch) == _BATCH:
            unfilled.model.objects.bulk_update(batch, ["pass_probability"])
            batch = []
    unfilled.model.objects.bulk_update(batch, ["pass_probability"])


def _fill(apps, schema_editor) -> None:
    pass_probabilities_fill(apps.get_model("grading", "CriteriaVersion"), apps.get_model("grading", "Review"))


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0043_trial_figures_items"),
    ]

    operations = [
        migrations.AddField(
            model_name="review",
            name="pass_probability",
            field=models.FloatField(
                blank=True,
                help_text="The judge's probability that the item passes, from its answers and confidences as the "
                "version's required checks read them (grading/judge/pass_probability.py); null: the judge could not "
                "grade it.",
                null=True,
            ),
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="review",
            index=models.Index(condition=models.Q(("audit", True)), fields=["org", "kind"], name="review_audited"),
        ),
    ]

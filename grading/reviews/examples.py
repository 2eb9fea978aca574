"""Worked examples of a criteria version (CriteriaExample): items whose human verdict on one check shows how the
check is read. A criteria admin adds them to an unpublished version, edits their explanation or removes them; the
judge reads them in the version's prompt (grading/judge/examples.py), so they are part of its criteria and of its
fingerprint (`criteria_fingerprint`).

An example quotes the item's evidence as the person decided it. The human verdict (grading/reviews/human.py) is
always on the item's present evidence, so the present active path (or the draft's title and body) is that
evidence; it is copied into the example and kept however the item changes later.

Every write locks the version (`criteria_edit_lock`: a published version is refused, CriteriaImmutable, and so is
an edit made from an older revision), moves its revision on and is audited, in one transaction. Nothing is ever cut
to fit the judge's context: an example too large, or one too many, is refused.
"""

from functools import lru_cache

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.checks.answers import answer_refusal
from grading.checks.definitions import CheckSet
from grading.core import evidence
from grading.core.evidence_text import content_text, estimate_tokens, tool_call_text
from grading.figures.definitions import SCORED, machine_verdict
from grading.figures.expressions import Lit
from grading.judge.examples import PromptExample, QuotedMessage, examples_text
from grading.judge.examples import criteria_fingerprint as fingerprint_of
from grading.models import Conversation, CriteriaExample, CriteriaVersion, Draft, ItemKind, Label, Review
from grading.models.audit import audit_record
from grading.models.criteria import default_checks
from grading.reviews.conversation_reads import conversation_path
from grading.reviews.human import human_verdict_of
from grading.reviews.versions import criteria_edit_lock

EXAMPLES_MAX = 8  # a version's examples: each is read in every judge call under it
EXAMPLE_MAX_TOKENS = 2_000  # one example as the judge reads it (estimate_tokens)
EXAMPLES_MAX_TOKENS = 6_000  # all of them: what the prefix takes from every stage's budget for evidence
EXPLANATION_MAX_CHARS = 2_000


class ExampleRefused(Exception):
    """An example that may not be added or saved; the message says why. Nothing was written."""


# --- what the judge reads ------------------------------------------------------------------------------------


def version_examples(version: CriteriaVersion) -> tuple[PromptExample, ...]:
    """The version's examples as the judge reads them, in prompt order (position, then id). A published version's
    change only when an erasure takes one, which moves its revision on: they are read once per process and revision.
    """
    if version.published_at is not None:
        return _published_examples(version.pk, version.revision)
    return _examples(version.pk)


def version_fingerprint(version: CriteriaVersion, examples: tuple[PromptExample, ...] | None = None) -> str:
    """What the judge reads of the version's criteria, fingerprinted: its rubric, rules, checks and examples. A caller
    grading under a version still being edited (a trial) reads the examples once and passes them here and to the
    prompt, so an edit in between cannot make the fingerprint name examples the judge did not read."""
    if examples is None and version.published_at is not None:
        return _published_fingerprint(version.pk, version.revision)
    examples = _examples(version.pk) if examples is None else examples
    checks = _read_checks(version.kind, version.checks)
    return fingerprint_of(rubric=version.rubric, rules=version.rules, examples=examples, checks=checks)


def _examples(version_id: int) -> tuple[PromptExample, ...]:
    rows = CriteriaExample.objects.filter(criteria_version_id=version_id).order_by("position", "pk")
    return tuple(prompt_example(row) for row in rows)


@lru_cache(maxsize=256)
def _published_examples(version_id: int, revision: int) -> tuple[PromptExample, ...]:
    return _examples(version_id)


@lru_cache(maxsize=256)
def _published_fingerprint(version_id: int, revision: int) -> str:
    rubric, rules, kind, checks = CriteriaVersion.objects.values_list("rubric", "rules", "kind", "checks").get(
        pk=version_id
    )
    examples = _published_examples(version_id, revision)
    return fingerprint_of(rubric=rubric, rules=rules, examples=examples, checks=_read_checks(kind, checks))


def _read_checks(kind: str, checks: dict) -> dict | None:
    """The checks as the fingerprint reads them: None for the checks of today (`default_checks`), so a version asking
    them fingerprints as before versions defined their own."""
    check_set = CheckSet.model_validate(checks) if checks else default_checks(kind)
    return None if check_set == default_checks(kind) else check_set.model_dump(mode="json")


def prompt_example(example: CriteriaExample) -> PromptExample:
    quoted = example.evidence
    messages = tuple(
        QuotedMessage(
            id=message["id"], role=message["role"], content=message["content"], tool_calls=tuple(message["tool_calls"])
        )
        for message in quoted.get("messages", ())
    )
    return PromptExample(
        external_id=example.external_id,
        check=example.check_name,
        human_verdict=example.human_verdict,
        note=example.note,
        explanation=example.explanation,
        messages=messages,
        title=quoted.get("title", ""),
        body=quoted.get("body", ""),
    )


# --- writes ----------------------------------------------------------------------------------------------------


def criteria_example_add(
    *,
    version: CriteriaVersion,
    subject: Conversation | Draft,
    check: str,
    actor: AbstractBaseUser | None = None,
    revision: int | None = None,
    explanation: str = "",
) -> CriteriaExample:
    """Add `subject` to the version's examples of `check`, at the end (with its `explanation`, when one comes with it:
    an expected reply's, grading/conversations/expected_replies.py).

    1. The item must be of the version's org and kind, and `check` one the version asks (a draft's: pass_fail).
    2. Read its human verdict on its present evidence (decisions first, then labels); refuse without a verdict on
       `check`, and a verdict the version's check does not allow. Quote that evidence, and the verdict of its
       counting review (the machine's at the time), if any.
    3. Lock the version (refused when published, or edited since `revision`); refuse a second example of the item on
       the check, a ninth example, and an example or examples too large for the judge's context. Write it, move the
       revision on and audit, in one transaction.
    """
    kind = ItemKind.DRAFT if isinstance(subject, Draft) else ItemKind.CONVERSATION
    explanation = explanation.replace("\r\n", "\n").strip()
    if len(explanation) > EXPLANATION_MAX_CHARS:
        raise ExampleRefused(
            f"An explanation has at most {EXPLANATION_MAX_CHARS:,} characters; this one would have "
            f"{len(explanation):,}. Nothing is cut to fit."
        )
    if subject.org_id != version.org_id or kind != version.kind:
        raise ExampleRefused(f"{subject} is not a {version.kind} of this version's org.")
    checks = example_checks(version)
    if check not in checks:
        raise ExampleRefused(f"{check!r} is not a check of {kind}s in {version}: one of {', '.join(checks)}.")
    human = human_verdict_of(subject)
    verdict = human.checks.get(check) if human is not None else None
    if human is None or verdict is None:
        raise ExampleRefused(
            f"{subject.external_id} has no human verdict on {check} for its present evidence: only a decision or a "
            "label on the evidence the item holds now can be an example."
        )
    if kind == ItemKind.CONVERSATION and (refusal := answer_refusal(version.check_set()[check], verdict)):
        # Given under another version, where the check asked something else (a verdict, now a category).
        raise ExampleRefused(f"The human verdict on {check} cannot show how {version} reads it: {refusal}.")
    quoted = _quoted_evidence(subject, human.fingerprint)
    example = CriteriaExample(
        org_id=version.org_id,
        criteria_version=version,
        **{kind: subject},
        external_id=subject.external_id,
        check_name=check,
        human_verdict=verdict,
        machine_verdict=_machine_verdict(subject, kind, check, human.review_id),
        source=human.source,
        fingerprint=human.fingerprint,
        evidence=quoted,
        note=human.note,
        explanation=explanation,
        added_by=actor if actor is not None and actor.is_authenticated else None,
    )
    with transaction.atomic():
        locked = criteria_edit_lock(version=version, revision=revision)
        present = list(CriteriaExample.objects.filter(criteria_version=locked).order_by("position", "pk"))
        if any(row.external_id == subject.external_id and row.check_name == check for row in present):
            raise ExampleRefused(f"{subject.external_id} is already an example of {check} in {locked}.")
        if len(present) >= EXAMPLES_MAX:
            raise ExampleRefused(
                f"{locked} has {len(present)} examples, the most a version may have ({EXAMPLES_MAX}): every judge "
                "call reads them all. Remove one first."
            )
        _fits([*present, example])
        example.criteria_version = locked
        example.position = (present[-1].position + 1) if present else 1
        example.save()
        _edited(locked, actor, action="criteria.example.add", example=example)
    return example


def example_checks(version: CriteriaVersion) -> tuple[str, ...]:
    """What an example of `version` may show the reading of: a draft's pass or fail, or a check the version asks."""
    return (Label.PASS_FAIL,) if version.kind == ItemKind.DRAFT else version.check_set().keys


def criteria_example_explain(
    *, example: CriteriaExample, explanation: str, actor: AbstractBaseUser | None = None, revision: int | None = None
) -> CriteriaExample:
    """Save the criteria admin's explanation of an example (how it reads the check), under the version's lock."""
    explanation = explanation.replace("\r\n", "\n").strip()
    if len(explanation) > EXPLANATION_MAX_CHARS:
        raise ExampleRefused(f"An explanation has at most {EXPLANATION_MAX_CHARS:,} characters.")
    with transaction.atomic():
        locked = criteria_edit_lock(version=example.criteria_version, revision=revision)
        row = CriteriaExample.objects.select_for_update().filter(pk=example.pk, criteria_version=locked).first()
        if row is None:
            raise ExampleRefused("That example was removed meanwhile.")
        row.explanation = explanation
        _fits([other if other.pk != row.pk else row for other in locked.examples.order_by("position", "pk")])
        row.save(update_fields=["explanation"])
        _edited(locked, actor, action="criteria.example.explain", example=row)
    return row


def criteria_example_remove(
    *, example: CriteriaExample, actor: AbstractBaseUser | None = None, revision: int | None = None
) -> None:
    """Remove an example from its (unpublished) version, under the version's lock."""
    with transaction.atomic():
        locked = criteria_edit_lock(version=example.criteria_version, revision=revision)
        row = CriteriaExample.objects.filter(pk=example.pk, criteria_version=locked).first()
        if row is None:
            return  # removed meanwhile: the version already reads as asked
        _edited(locked, actor, action="criteria.example.remove", example=row)
        row.delete()


def _quoted_evidence(subject: Conversation | Draft, fingerprint: str) -> dict:
    """The evidence the person's verdict was on: the item's present active path, or its draft's title and body.
    Refused if the item moved on since its verdict was read (the verdict is then about evidence it no longer holds)."""
    if isinstance(subject, Draft):
        if subject.fingerprint != fingerprint:
            raise ExampleRefused(f"{subject.external_id} changed since its verdict was read; try again.")
        return {"title": subject.title, "body": subject.body}
    path = conversation_path(subject).path
    if evidence.fingerprint(path) != fingerprint:
        raise ExampleRefused(f"{subject.external_id} changed since its verdict was read; try again.")
    return {"messages": [_quoted_message(message) for message in path]}


def _quoted_message(message: evidence.EvidenceMessage) -> dict:
    if isinstance(message.tool_calls, list):
        calls = [tool_call_text(call) for call in message.tool_calls]
    else:
        calls = [] if message.tool_calls is None else [tool_call_text(message.tool_calls)]
    return {"id": message.id, "role": message.role, "content": content_text(message.content), "tool_calls": calls}


def _machine_verdict(subject: Conversation | Draft, kind: str, check: str, decided_review_id: int | None) -> str:
    """What the machine said on `check` about this evidence: its counting review's verdict, else the decided
    review's; blank when neither gave one (an error, not scorable)."""
    reviews = Review.objects.filter(**{kind: subject}, fingerprint=subject.fingerprint)
    review = reviews.counting().first()
    if review is None and decided_review_id is not None:
        review = reviews.filter(pk=decided_review_id).first()
    if review is None:
        return ""
    row = {"kind": review.kind, "route": review.route, "judge_passed": review.judge_passed, "checks": review.checks}
    if not SCORED.py(row):
        return ""
    if kind == ItemKind.DRAFT:
        return machine_verdict(Lit(check)).py(row)
    # The answer as the review stores it, whatever the check's kind: a category or a score is shown as given.
    answer = (review.checks.get(check) or {}).get("verdict")
    return answer if isinstance(answer, str) else ""


def _fits(examples: list[CriteriaExample]) -> None:
    """Refuse examples the judge's prompt could not carry beside the evidence (nothing is cut to fit)."""
    rendered = [prompt_example(example) for example in examples]
    for example, prompt in zip(examples, rendered, strict=True):
        tokens = estimate_tokens(examples_text([prompt]))
        if tokens > EXAMPLE_MAX_TOKENS:
            raise ExampleRefused(
                f"The example of {example.external_id} on {example.check_name} is about {tokens:,} tokens as the "
                f"judge reads it; an example may take at most {EXAMPLE_MAX_TOKENS:,}. Nothing is cut to fit: "
                "choose a shorter item, or a shorter explanation."
            )
    total = estimate_tokens(examples_text(rendered))
    if total > EXAMPLES_MAX_TOKENS:
        raise ExampleRefused(
            f"The version's examples would take about {total:,} tokens of every judge call; at most "
            f"{EXAMPLES_MAX_TOKENS:,}. Nothing is cut to fit: remove an example or shorten an explanation."
        )


def _edited(version: CriteriaVersion, actor: AbstractBaseUser | None, *, action: str, example: CriteriaExample) -> None:
    """Move the locked version's revision on, as every saved edit does, and audit the change."""
    version.revision += 1
    version.updated_at = timezone.now()
    version.updated_by = actor if actor is not None and actor.is_authenticated else None
    version.save(update_fields=["revision", "updated_at", "updated_by"])
    audit_record(
        action=action,
        org=version.org,
        actor=actor,
        target=version,
        detail={
            "example": example.pk,
            "item": example.external_id,
            "check": example.check_name,
            "human_verdict": example.human_verdict,
            "revision": version.revision,
        },
        item=example,
    )

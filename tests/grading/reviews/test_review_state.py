"""One definition of a review's state, held against an independent recomputation from the rows.

A hypothesis state machine ingests, appends, edits, regenerates and switches branches of conversations,
submits and resubmits drafts, runs grading passes with the loopback judge, publishes criteria, claims,
decides and lets leases expire. After every step, what each reader reports (the planner's "needs grading",
the queue, the API's review, the staleness audit) must equal what the rows say by this rule:
an item's review counts when it is the newest of the item's reviews that read the item's present
fingerprint under the active criteria version of its kind.
"""

import contextlib
import itertools
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append, conversation_upsert
from grading.core.schemas import ConversationIn, MessagesIn
from grading.drafts.gate import draft_grade
from grading.models import Conversation, CriteriaVersion, Decision, Draft, ItemKind, Org, Review, ReviewState
from grading.passes.planner import conversations_needing_grading, drafts_needing_grading, grading_pass
from grading.reviews.reads import current_review, staleness_audit
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from reviewer.models import Claim, Role
from reviewer.queue.display import queue_page
from reviewer.queue.services import Refused, claim_take, decision_create
from tests.builders.conversations import PATH_IDS, llm_judge, message, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft
from tests.builders.people import make_person
from tests.fakes.openai_server import FakeLLM, hang_reply

pytestmark = pytest.mark.django_db

CONVERSATION_KEYS = ("c1", "c2", "c3")
DRAFT_KEYS = ("d1", "d2")
# A small pool of texts, so edits and resubmissions come back to content that was graded before.
TEXTS = ("Refund order 1182, please.", "Where is my parcel?", "Thanks, that works.")
BODIES = (CLEAN_BODY, CLEAN_BODY.replace("Review them every month.", "Review them monthly."))
_orgs = itertools.count()


class ReviewStateMachine(RuleBasedStateMachine):
    fake_llm: FakeLLM  # set by the test

    def __init__(self) -> None:
        super().__init__()
        n = next(_orgs)
        self.org = Org.objects.create(name=f"State {n}", slug=f"state-{n}")
        self.operator = make_person(f"operator-{n}", self.org, Role.OPERATOR)
        self.admin = make_person(f"admin-{n}", self.org, Role.CRITERIA_ADMIN)
        self.api = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=self.org, name='state').plaintext}")
        self.message_ids = itertools.count()

    # --- conversations ---------------------------------------------------------------------------------

    def _conversation(self, key: str) -> Conversation | None:
        return Conversation.objects.filter(org=self.org, external_id=key).first()

    @rule(key=st.sampled_from(CONVERSATION_KEYS), text=st.sampled_from(TEXTS))
    def ingest_conversation(self, key, text):
        if self._conversation(key) is not None:
            return
        messages = [
            {"id": "u0", "parent_id": None, "role": "user", "content": text},
            {"id": "a0", "parent_id": "u0", "role": "assistant", "content": "Done."},
        ]
        payload = {"external_id": key, "application": "billing", "closed": True, "messages": messages}
        conversation_upsert(org=self.org, payload=ConversationIn.model_validate(payload))

    @rule(key=st.sampled_from(CONVERSATION_KEYS), role=st.sampled_from(["user", "assistant"]))
    def append(self, key, role):
        conversation = self._conversation(key)
        if conversation is None:
            return
        leaf = conversation.active_path_ids[-1]
        message = {"id": f"x{next(self.message_ids)}", "parent_id": leaf, "role": role, "content": "More."}
        conversation_append(org=self.org, external_id=key, payload=MessagesIn(messages=[message]))

    @rule(key=st.sampled_from(CONVERSATION_KEYS), text=st.sampled_from(TEXTS))
    def edit_first_message(self, key, text):
        if self._conversation(key) is None:
            return
        message = {"id": "u0", "parent_id": None, "role": "user", "content": text}
        conversation_append(org=self.org, external_id=key, payload=MessagesIn(messages=[message]))

    @rule(key=st.sampled_from(CONVERSATION_KEYS))
    def regenerate_reply(self, key):
        """A regenerated reply: a sibling of the first answer becomes the active leaf."""
        if self._conversation(key) is None:
            return
        message = {"id": f"r{next(self.message_ids)}", "parent_id": "u0", "role": "assistant", "content": "Again."}
        payload = MessagesIn(messages=[message], active_message_id=message["id"])
        conversation_append(org=self.org, external_id=key, payload=payload)

    @rule(key=st.sampled_from(CONVERSATION_KEYS))
    def switch_back_to_the_first_reply(self, key):
        if self._conversation(key) is None:
            return
        first_reply = {"id": "a0", "parent_id": "u0", "role": "assistant", "content": "Done."}
        payload = MessagesIn(messages=[first_reply], active_message_id="a0")
        conversation_append(org=self.org, external_id=key, payload=payload)

    # --- drafts ----------------------------------------------------------------------------------------------

    @rule(key=st.sampled_from(DRAFT_KEYS), body=st.sampled_from(BODIES))
    def submit_draft(self, key, body):
        save_draft(self.org, body, external_id=key)

    # --- grading and criteria --------------------------------------------------------------------------------

    @rule(
        conversation_outcome=st.sampled_from(["pass", "fail", "unknown"]),
        draft_outcome=st.sampled_from(["pass", "human", "fail"]),
    )
    def grading_pass_with_the_loopback_judge(self, conversation_outcome, draft_outcome):
        """What a worker does for each task of the pass (grading/tasks.py), in process."""
        result = grading_pass()
        for conversation_id in result.enqueued_ids:
            path = Conversation.objects.get(pk=conversation_id).active_path_ids
            self.fake_llm.script(verdicts_reply(path, complete=conversation_outcome))
            conversation_grade(conversation_id=conversation_id, judge=llm_judge(self.fake_llm))
            Conversation.objects.filter(pk=conversation_id).update(queued_at=None)
        for draft_id in result.enqueued_draft_ids:
            # a judge that contradicts itself (7, "failed") sends the draft to people
            self.fake_llm.script(
                {"pass": draft_reply(9), "human": draft_reply(7, passed=False), "fail": draft_reply(3)}[draft_outcome]
            )
            draft_grade(draft_id=draft_id, judge=llm_draft_judge(self.fake_llm))
            Draft.objects.filter(pk=draft_id).update(queued_at=None)
        self.fake_llm.reset()

    @rule(kind=st.sampled_from([ItemKind.CONVERSATION, ItemKind.DRAFT]))
    def publish_criteria(self, kind):
        criteria_active(org=self.org, kind=kind)
        criteria_publish(version=criteria_new_version(org=self.org, kind=kind), actor=self.admin)

    # --- people ----------------------------------------------------------------------------------------------

    def _waiting(self) -> list[Review]:
        return list(Review.objects.waiting().filter(org=self.org).order_by("pk"))

    @precondition(lambda self: bool(self._waiting()))
    @rule(data=st.data())
    def claim(self, data):
        review = data.draw(st.sampled_from(self._waiting()))
        with contextlib.suppress(Refused):  # held by nobody else here, but it may have been decided
            claim_take(user=self.operator, review_id=review.pk)

    @rule(data=st.data())
    def decide(self, data):
        claims = list(Claim.objects.filter(org=self.org, ended_at__isnull=True).order_by("pk"))
        if not claims:
            return
        review = Review.objects.get(pk=data.draw(st.sampled_from(claims)).review_id)
        checks = {"grounded": "pass", "complete": "fail", "usable": "pass"}
        draft = review.kind == ItemKind.DRAFT
        verdict = PersonVerdict(outcome="approve") if draft else PersonVerdict(checks=checks, note="Checked.")
        with contextlib.suppress(Refused):  # a lease that ran out, or an item that changed: nothing written
            decision_create(user=self.operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict)

    @rule()
    def leases_expire(self):
        Claim.objects.filter(org=self.org, ended_at__isnull=True).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )

    # --- the independent recomputation -----------------------------------------------------------------

    def _items(self):
        for conversation in Conversation.objects.filter(org=self.org):
            yield "conversation", conversation
        for draft in Draft.objects.filter(org=self.org):
            yield "draft", draft

    def _expected_counting(self) -> dict[tuple[str, int], Review | None]:
        """Per item: the newest of its reviews that read its present fingerprint under the active criteria."""
        active = set(CriteriaVersion.objects.filter(org=self.org, is_active=True).values_list("pk", flat=True))
        expected = {}
        for field, item in self._items():
            reviews = Review.objects.filter(**{field: item}).exclude(state=ReviewState.TRIAL)
            matching = [r for r in reviews if r.fingerprint == item.fingerprint and r.criteria_version_id in active]
            expected[(field, item.pk)] = max(matching, key=lambda r: (r.finished_at, r.pk), default=None)
        return expected

    @invariant()
    def every_reader_agrees_with_the_rows(self):
        expected = self._expected_counting()
        counting = {r.pk for r in expected.values() if r is not None}
        decided = set(Decision.objects.filter(review__org=self.org).values_list("review_id", flat=True))
        waiting = {pk for pk, r in ((r.pk, r) for r in expected.values() if r) if r.route == "human"} - decided

        # the state itself
        assert set(Review.objects.filter(org=self.org).counting().values_list("pk", flat=True)) == counting
        # the queue: as a set, and as the pages an operator reads
        assert {r.pk for r in self._waiting()} == waiting
        page = queue_page(user=self.operator, page_size=100)
        assert {row.review_id for row in page.rows} == waiting
        # the planner: items with no review that counts, or whose review is an error
        needing = {key for key, r in expected.items() if r is None or r.route == "error"}
        conversations = conversations_needing_grading(timezone.now()).filter(org=self.org)
        drafts = drafts_needing_grading().filter(org=self.org)
        planned = {("conversation", pk) for pk in conversations.values_list("pk", flat=True)}
        planned |= {("draft", pk) for pk in drafts.values_list("pk", flat=True)}
        assert planned == needing
        # the API and the pipeline's view
        for (field, pk), review in expected.items():
            item = Conversation.objects.get(pk=pk) if field == "conversation" else Draft.objects.get(pk=pk)
            assert current_review(item) == review
            if field == "conversation":
                body = json.loads(self.api.get(f"/api/v1/conversations/{item.external_id}").content)
                assert (body["review"] or {}).get("identity", {}).get("fingerprint") == (
                    review.fingerprint if review else None
                )
                assert body["review"] is None or body["review"]["is_current"] is True
            else:
                body = json.loads(self.api.get(f"/api/v1/drafts/{pk}").content)
                assert body["route"] == (review.route if review else "pending")
        # the staleness audit: graded items whose review stopped counting; nothing counted wrongly
        audit = staleness_audit(self.org)
        graded = {(f, item.pk) for f, item in self._items() if Review.objects.filter(**{f: item}).exists()}
        for kind in ("conversation", "draft"):
            assert audit.stale[kind] == sum(1 for key in graded if key[0] == kind and expected[key] is None)
            assert audit.mismatched[kind] == 0


@pytest.mark.slow
def test_every_reader_reports_what_the_rows_say(fake_llm):
    ReviewStateMachine.fake_llm = fake_llm
    ReviewStateMachine.TestCase.settings = settings(
        max_examples=20,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    ReviewStateMachine.TestCase().runTest()


# --- a grader that finishes after the item changed -------------------------------------------------------------


def _while_the_judge_is_asked(fake_llm: FakeLLM, grade, change) -> Review:
    """Run `grade` in a thread of its own (its own connection); once its judge request is in flight, `change`
    the item and commit; then let the judge answer."""
    with ThreadPoolExecutor(max_workers=1) as pool:

        def graded() -> Review:
            try:
                return grade()
            finally:
                connections.close_all()

        future = pool.submit(graded)
        deadline = time.monotonic() + 10
        while not fake_llm.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fake_llm.chat_requests(), "the grader never asked the judge"
        change()
        return future.result(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_a_grader_that_read_a_conversation_before_an_append_writes_no_current_review(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(hang_reply(1.0, then=verdicts_reply(PATH_IDS)))
    follow_up = MessagesIn.model_validate({"messages": [message("m5", "user", "And 1183?", "m4", 10)]})

    review = _while_the_judge_is_asked(
        fake_llm,
        lambda: conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm)),
        lambda: conversation_append(org=org, external_id=conversation.external_id, payload=follow_up),
    )
    conversation.refresh_from_db()
    assert review.fingerprint != conversation.fingerprint  # it judged the path without m5
    assert review.state == ReviewState.STALE
    assert current_review(conversation) is None
    assert conversations_needing_grading(timezone.now()).filter(pk=conversation.pk).exists()
    assert staleness_audit(org).stale["conversation"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_late_grader_never_displaces_the_review_of_the_present_content(org, fake_llm):
    """The draft was resubmitted and graded again while an older grading still waited on the judge."""
    draft = save_draft(org, BODIES[0])
    fake_llm.script(hang_reply(1.0, then=draft_reply(9)))

    def resubmit_and_grade_again() -> None:
        save_draft(org, BODIES[1])
        fake_llm.script(draft_reply(3))
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))

    late = _while_the_judge_is_asked(
        fake_llm, lambda: draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm)), resubmit_and_grade_again
    )
    draft.refresh_from_db()
    present = current_review(draft)
    assert present is not None and present.fingerprint == draft.fingerprint and present.route == "fail"
    assert late.fingerprint != draft.fingerprint and late.state == ReviewState.SUPERSEDED


def test_a_conversation_switched_back_to_a_graded_branch_counts_again_with_no_judge_call(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(verdicts_reply(PATH_IDS))
    first = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    regenerated = message("m4c", "assistant", "Refunded.", "m3", 5)
    conversation_append(
        org=org, external_id="cv-1", payload=MessagesIn(messages=[regenerated], active_message_id="m4c")
    )
    assert current_review(conversation) is None
    back = MessagesIn.model_validate(
        {
            "messages": [message("m4", "assistant", "Done: order 1182 was refunded, 49.90 is on its way.", "m3", 4)],
            "active_message_id": "m4",
        }
    )
    conversation_append(org=org, external_id="cv-1", payload=back)
    assert current_review(conversation) == first
    assert len(fake_llm.chat_requests()) == 1
    assert not conversations_needing_grading(timezone.now()).filter(pk=conversation.pk).exists()

"""Builders for draft tests: a draft that passes every v1 rule, and scripted judge replies."""

from grading.core.schemas import DraftIn
from grading.drafts.submit import draft_save
from grading.judge.backends import OpenAIDraftJudge
from grading.judge.client import ChatJudgeClient
from grading.models import Org
from grading.reviews.memory import article_upsert, memory_add
from tests.fakes.openai_server import FakeLLM, json_reply

SOURCE = "https://example.com/support-costs-study"

CLEAN_BODY = f"""\
Support teams spend most of their week on questions a help page could answer.

## How do self-service answers cut support costs?

Acme Logistics cut ticket volume by 38% in one quarter after publishing answers to its twenty most common
questions, according to [their study]({SOURCE}).

<ArticleCallout variant="summary" />

## What should a team publish first?

Start with the questions that reach agents most often. See [our ticket triage guide](/writing/ticket-triage)
and [how we measure deflection](/writing/measuring-deflection).

<ArticleCaseStudyCallout />

## When does self-service stop paying off?

When answers go stale. Review them every month.

<ArticleCta />
"""


def setup_org_memory(org: Org) -> None:
    memory_add(org=org, kind="fact", text="Acme Logistics cut ticket volume by 38%.", proof_terms=["Acme Logistics"])
    memory_add(org=org, kind="strategy", text="Write for support leaders at mid-size companies.")
    memory_add(org=org, kind="learning", text="Lead with the customer's number, not ours.")
    for slug, title in [
        ("ticket-triage", "Ticket triage that scales"),
        ("measuring-deflection", "How to measure deflection"),
        ("help-center-seo", "Help-center pages that answer engines quote"),
    ]:
        article_upsert(org=org, slug=slug, title=title, summary=f"About {title.lower()}.")


def save_draft(org: Org, body: str = CLEAN_BODY, *, external_id: str = "d-1", sources=(SOURCE,), callback_url=None):
    payload = DraftIn(
        external_id=external_id,
        title="Cutting support costs with self-service",
        slug="cutting-support-costs",
        body=body,
        source_urls=list(sources),
        callback_url=callback_url,
    )
    return draft_save(org=org, payload=payload)


def draft_verdict(overall: int, *, passed: bool | None = None, aeo=4, writing=4, org_fit=4, issues=None) -> dict:
    return {
        "overall": overall,
        "aeo": aeo,
        "writing": writing,
        "org_fit": org_fit,
        "passed": overall >= 7 if passed is None else passed,
        "issues": issues if issues is not None else [{"issue": "The intro is long.", "fix": "Cut it to one line."}],
    }


def draft_reply(overall: int, **kwargs):
    return json_reply(draft_verdict(overall, **kwargs))


def llm_draft_judge(fake_llm: FakeLLM) -> OpenAIDraftJudge:
    client = ChatJudgeClient(
        base_url=fake_llm.base_url,
        model="judge-test",
        api_key="k",
        timeout=2.0,
        max_retries=1,
        want_logprobs=True,
        sleep=lambda _: None,
    )
    return OpenAIDraftJudge(client)

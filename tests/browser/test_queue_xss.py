"""Hostile text everywhere the queue shows untrusted content renders as text in Chromium: no dialog, no injected
element, no script run, no CSP violation. Drafts, agent messages, tool calls and results, and the judge's words."""

import json

import pytest
from django.urls import reverse

from reviewer.queue.services import claim_take
from tests.builders.browser import sign_in
from tests.builders.conversations import message, verdicts
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOADS = [
    "<script>window.__pwned = 'script'; alert('script')</script>",
    "<img src=x onerror=\"window.__pwned = 'onerror'; alert('onerror')\">",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>",
    '"><script>window.__pwned = "attribute"</script>',
    '<a id="xss-link" href="javascript:window.__pwned = \'href\'">a link</a>',
    "[markdown link](javascript:window.__pwned='markdown')",
    '<div id="xss-hx" hx-get="/logout/" hx-trigger="load" hx-target="body">hx</div>',
    '<div id="xss-hx-on" hx-on:htmx:load="window.__pwned = \'hx-on\'">hx-on</div>',
    "<style>body { display: none }</style>",
    '<iframe id="xss-frame" src="javascript:alert(\'frame\')"></iframe>',
]
HOSTILE = "\n\n".join(PAYLOADS)
INJECTED = (
    "#xss-link, #xss-hx, #xss-hx-on, #xss-frame, iframe, main svg[onload], img, script:not([src]), body style, "
    "[onerror], [onload], a[href^='javascript:'], [hx-get='/logout/'], [hx-trigger='load']"
)
# Runs before the page's own scripts (Playwright injects it outside the page's CSP): records every violation.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def hostile_items(org, operator):
    draft = draft_item(
        org,
        "hostile-draft",
        title="<script>alert('title')</script> Title",
        body=f"## Is this safe?\n\n{HOSTILE}\n\nSome prose after it.",
        judge_issues=[{"issue": HOSTILE, "fix": PAYLOADS[1]}],
        findings=[{"code": "banned_word", "message": PAYLOADS[0], "severity": "fatal", "spans": [[3, 20], [30, 80]]}],
        repairs={"diff": f"-{PAYLOADS[0]}\n+{PAYLOADS[1]}", "body": None, "applied": [{"description": PAYLOADS[2]}]},
        memory_used={"learnings": [{"text": PAYLOADS[6]}], "strategy": {"text": PAYLOADS[7]}, "facts": []},
    )
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "refund<script>alert(1)</script>", "arguments": json.dumps({"note": HOSTILE})},
    }
    extra = [
        message("h1", "user", HOSTILE, "m4", 10),
        message("h2", "assistant", [{"type": "text", "text": PAYLOADS[4]}], "h1", 11, tool_calls=[tool_call]),
        message("h3", "tool", json.dumps({"result": HOSTILE}), "h2", 12, tool_call_id="call_1", name=PAYLOADS[5]),
        message("h4", "assistant", PAYLOADS[6], "h3", 13),
    ]
    checks = verdicts(["h1", "h3"], complete="unknown")
    for check in checks.values():
        check["rationale"] = HOSTILE
    conversation = conversation_item(
        org,
        "cv-<b onclick=alert(1)>hostile",
        application="<i>app</i>",
        checks=checks,
        extra=extra,
        active_message_id="h4",
    )
    for review in (draft, conversation):
        claim_take(user=operator, review_id=review.pk)
    return draft, conversation


def assert_inert(page) -> None:
    page.wait_for_timeout(300)  # time for an hx-trigger="load" or an onerror to fire, were they live
    assert page.evaluate("window.__pwned === undefined")
    assert page.evaluate(f"document.querySelectorAll({json.dumps(INJECTED)}).length") == 0
    assert page.evaluate("window.__violations") == []
    assert page.url.startswith(page.context.pages[0].url.split("/queue/")[0])  # no hx-get to /logout/ swapped in
    assert page.locator("header.top .who").is_visible()  # still signed in, body not hidden


def test_hostile_text_renders_as_text_on_the_queue_and_both_item_pages(page, operator, org):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.add_init_script(WATCH)
    draft, conversation = hostile_items(org, operator)
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")
    assert "cv-<b onclick=alert(1)>hostile" in page.locator("#queue-list").inner_text()
    assert_inert(page)

    page.goto(reverse("review_detail", args=[draft.pk]))
    article = page.locator("section.article").inner_text()
    assert "<script>window.__pwned = 'script'; alert('script')</script>" in article
    assert "[markdown link](javascript:window.__pwned='markdown')" in article
    assert 'hx-get="/logout/"' in article
    assert "<script>alert('title')</script> Title" in page.locator("main").inner_text()
    assert_inert(page)

    page.goto(reverse("review_detail", args=[conversation.pk]))
    path = page.locator(".path").inner_text()
    assert "<img src=x onerror=" in path and "hx-on:htmx:load" in path
    assert "refund<script>alert(1)</script>" in path
    assert "Judge: <script>window.__pwned = 'script'" in page.locator("main").inner_text()
    assert_inert(page)

    assert dialogs == []
    assert page.console_errors == []

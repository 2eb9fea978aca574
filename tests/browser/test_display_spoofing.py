"""Untrusted ids, titles and text cannot spoof or break the pages in Chromium (issue 11), checked by geometry.

Bidi overrides and zero-width characters show as markers and reorder nothing; no untrusted string, however long,
makes a page or a card wider than it is; the decision bar never lies over a card; the thumbs are drawn, not typed
(Debian's Chromium has no emoji font, and an emoji renders as an empty box).
"""

import pytest

from grading.models import Feedback, Review, ReviewState
from reviewer.queue.services import claim_take
from tests.builders.browser import sign_in
from tests.builders.conversations import message
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RLO, PDF, ZWSP = "\u202e", "\u202c", "\u200b"
SPOOFED_ID = f"cv-{RLO}evil{ZWSP}" + "x" * 180
SPOOFED_TITLE = f"Invoice {RLO}gnp.exe{PDF} for Q3 " + "W" * 250
SNAPSHOT = "mem1:" + "c83d" * 16
VIEWPORTS = [(1280, 800), (1024, 640), (820, 1000)]  # panes side by side, a short window, and one too narrow for panes


@pytest.fixture
def items(org, operator):
    draft = draft_item(
        org,
        "spoofed-draft",
        title=SPOOFED_TITLE,
        body="## Is this safe?\n\n" + "A" * 3000 + "\n\nShort prose.",
        memory_used={"snapshot": SNAPSHOT, "learnings": [{"text": "Lead with the answer."}], "strategy": None},
    )
    earlier = Review.objects.get(pk=draft.pk)  # an earlier review of the same draft, for "Other reviews"
    earlier.pk, earlier.state, earlier.fingerprint, earlier.judge_key = None, ReviewState.SUPERSEDED, "fp1:0", "old"
    earlier.save()
    long_call = {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "9" * 2500}}
    conversation = conversation_item(
        org,
        SPOOFED_ID,
        application=f"bill{ZWSP}ing",
        extra=[
            message("m5", "user", "y" * 4000, "m4", 9),
            message("m6", "assistant", None, "m5", 10, tool_calls=[long_call]),
            message("m7", "tool", "z" * 2500, "m6", 11, tool_call_id="call_2"),
            message("m8", "assistant", "Done.", "m7", 12),
        ],
        active_message_id="m8",
    )
    Feedback.objects.create(conversation=conversation.conversation, message_external_id="m4", value="up")
    Feedback.objects.create(conversation=conversation.conversation, message_external_id="m8", value="down")
    for review in (draft, conversation):
        claim_take(user=operator, review_id=review.pk)
    return {"draft": draft, "conversation": conversation}


def signed_in(page, operator, width: int = 1280, height: int = 800):
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")
    return page


def test_a_bidi_override_in_an_id_shows_as_a_marker_and_leaves_the_rest_of_the_line_in_order(page, operator, items):
    signed_in(page, operator).goto(f"/queue/items/{items['conversation'].pk}/")
    crumbs = page.locator(".crumbs")
    text = crumbs.inner_text()
    assert "cv-⟨U+202E⟩evil⟨U+200B⟩x" in text and "bill⟨U+200B⟩ing" in text
    assert RLO not in text and ZWSP not in text
    # Geometry: the application, written after the id, is shown after it (on its last line, or on a later line).
    # Unneutralised, the override reverses what follows it and the application lands to the left of the id.
    after = page.evaluate(
        """() => {
            const id = [...document.querySelector('.crumbs .external-id').getClientRects()].pop();
            const app = document.querySelector('.crumbs .application').getBoundingClientRect();
            return app.top > id.bottom - 2 || (app.top >= id.top - 2 && app.left >= id.right - 1);
        }"""
    )
    assert after
    assert page.title().startswith("Conversation cv-⟨U+202E⟩evil⟨U+200B⟩")


def test_the_queue_and_the_draft_title_show_the_marker_in_place(page, operator, items):
    signed_in(page, operator)
    rows = page.locator("#queue-list").inner_text()
    assert "Invoice ⟨U+202E⟩gnp.exe⟨U+202C⟩ for Q3" in rows and "cv-⟨U+202E⟩evil⟨U+200B⟩" in rows
    page.goto(f"/queue/items/{items['draft'].pk}/")
    assert page.locator("h2.title").inner_text().startswith("Invoice ⟨U+202E⟩gnp.exe⟨U+202C⟩ for Q3")


OVERFLOW = """() => {
    const root = document.documentElement;
    const page = root.scrollWidth - root.clientWidth;
    const cards = [...document.querySelectorAll('.card')]
        .filter((card) => card.scrollWidth > card.clientWidth + 1)
        .map((card) => (card.querySelector('h2') || card).textContent.trim().slice(0, 40));
    const escaping = [...document.querySelectorAll('.card *')].filter((el) => {
        const card = el.closest('.card').getBoundingClientRect(), box = el.getBoundingClientRect();
        const clipped = el.closest('pre, .diff, textarea, select');
        return !clipped && box.width > 0 && box.right > card.right + 1;
    }).map((el) => el.tagName + '.' + el.className + ': ' + el.textContent.trim().slice(0, 40));
    return {page, cards, escaping};
}"""


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_no_untrusted_text_makes_a_page_or_a_card_wider_than_it_is(page, operator, items, width, height):
    signed_in(page, operator, width, height)
    for path in ["/queue/", f"/queue/items/{items['draft'].pk}/", f"/queue/items/{items['conversation'].pk}/"]:
        page.goto(path)
        assert page.evaluate(OVERFLOW) == {"page": 0, "cards": [], "escaping": []}, path
    page.goto(f"/queue/items/{items['draft'].pk}/")
    snapshot = page.locator(".snapshot")
    assert SNAPSHOT in snapshot.inner_text().replace("\n", "")


COVERED = """(where) => {
    // Bring each card into view as a reader scrolling to it would, then ask what is on top at its first and last line.
    const covered = [];
    for (const card of document.querySelectorAll('.panes .card, main > div.card:not(.actions)')) {
        for (const block of ['start', 'end']) {
            card.scrollIntoView({block});
            const box = card.getBoundingClientRect();
            const y = block === 'start' ? box.top + 6 : box.bottom - 6;
            const x = box.left + box.width / 2;
            if (y < 0 || y > innerHeight) { covered.push(block + ' out of the window: ' + card.className); continue; }
            const top = document.elementFromPoint(x, y);
            if (!top || !card.contains(top)) {
                covered.push(block + ' of ' + (card.querySelector('h2') || card).textContent.trim().slice(0, 30)
                    + ' under ' + (top ? top.closest('[id], [class]')?.id || top.className : 'nothing'));
            }
        }
    }
    const bar = document.querySelector('#actions').getBoundingClientRect();
    if (bar.bottom > innerHeight + 1 && where === 'panes') covered.push('the decision bar is below the window');
    return covered;
}"""


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_the_decision_bar_never_lies_over_a_card(page, operator, items, width, height):
    signed_in(page, operator, width, height)
    for review in items.values():
        page.goto(f"/queue/items/{review.pk}/")
        where = "panes" if width >= 900 and height >= 560 else "flow"
        assert page.evaluate(COVERED, where) == [], (review.kind, where)
        other_reviews = page.locator(".card", has_text="Other reviews of this item")
        other_reviews.scroll_into_view_if_needed()
        bar, card = page.locator("#actions").bounding_box(), other_reviews.bounding_box()
        assert card["y"] + card["height"] <= bar["y"] or card["y"] >= bar["y"] + bar["height"]


def test_the_thumbs_are_drawn_so_they_show_without_an_emoji_font(page, operator, items):
    signed_in(page, operator).goto(f"/queue/items/{items['conversation'].pk}/")
    assert "👍" not in page.locator("main").inner_text() and "👎" not in page.locator("main").inner_text()
    for value, count in (("up", 2), ("down", 2)):  # in the feedback card and on the message
        thumbs = page.locator(f'svg.thumb[aria-label="thumbs {value}"]')
        assert thumbs.count() == count
        for index in range(count):
            box = thumbs.nth(index).bounding_box()
            assert box["width"] >= 10 and box["height"] >= 10
    assert page.console_errors == []

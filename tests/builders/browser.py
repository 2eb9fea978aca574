"""Driving the browser as a person would."""

from tests.builders.people import PASSWORD


def sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


# Counts the requests a page has sent and not yet had answered (htmx sends XMLHttpRequests); `settled` reads it.
_REQUESTS_IN_FLIGHT = """
window.__requestsInFlight = 0;
const send = XMLHttpRequest.prototype.send;
XMLHttpRequest.prototype.send = function (...args) {
  window.__requestsInFlight += 1;
  this.addEventListener("loadend", () => { window.__requestsInFlight -= 1; });
  return send.apply(this, args);
};
"""


def count_requests(context) -> None:
    """Every page of `context` counts its requests in flight, so that `settled` can wait for them."""
    context.add_init_script(_REQUESTS_IN_FLIGHT)


def settled(page) -> None:
    """Waits until the page has loaded, every request it sent since is answered, and what htmx swapped in has
    settled (htmx sends the requests of swapped-in content, `hx-trigger="load"`, when it settles, 20 ms after the
    swap). Playwright's "networkidle" waits out 500 ms without a request after every page instead. The page's
    context must count its requests (`count_requests`)."""
    page.wait_for_function(  # a function, not an expression: the pages' CSP refuses eval
        "() => document.readyState === 'complete' && window.__requestsInFlight === 0"
        " && !document.querySelector('.htmx-request, .htmx-settling')"
    )


def signed_in_tab(browser, live_server, person, lands_on: str, *, javascript: bool = True, viewport=None):
    """A tab of its own for `person`, signed in and landed on `lands_on`, collecting the console's errors and counting
    its requests (`settled`); in a window of `viewport` ({"width": .., "height": ..}) if given, else Playwright's
    1280 by 720."""
    context = browser.new_context(base_url=live_server.url, java_script_enabled=javascript, viewport=viewport)
    count_requests(context)
    tab = context.new_page()
    tab.console_errors = []
    tab.on("console", lambda message: message.type == "error" and tab.console_errors.append(message.text))
    sign_in(tab, person.username, PASSWORD)
    tab.wait_for_url(f"**{lands_on}")
    return tab


def sideways_scroll(page) -> int:
    """How far the page itself scrolls sideways, in CSS pixels (0 when everything fits the window)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def widths(page, selector: str) -> list[float]:
    """The rendered widths of every element `selector` matches, in CSS pixels."""
    return page.eval_on_selector_all(selector, "els => els.map(el => el.getBoundingClientRect().width)")


# Every text on the page that wraps, with the width its lines have, in characters of its own font: the box its
# lines break in is the nearest ancestor that is not inline, and a character is the text's own mean advance.
_WRAPPED_TEXTS = """() => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.replace(/\\s+/g, " ").trim();
    const parent = node.parentElement;
    if (!text || !parent || parent.closest("script, style, svg, option, noscript")) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
    const lines = new Set(rects.map(r => Math.round(r.bottom))).size;
    if (lines < 2) continue;
    let box = parent;
    while (box.parentElement && getComputedStyle(box).display.startsWith("inline")) box = box.parentElement;
    const style = getComputedStyle(box);
    const width = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const advance = rects.reduce((sum, r) => sum + r.width, 0) / text.length;
    const classes = typeof box.className === "string" ? box.className.trim().split(/\\s+/).filter(Boolean) : [];
    const label = box.tagName.toLowerCase() + (box.id ? "#" + box.id : "") + classes.map(c => "." + c).join("");
    found.push({text: text.slice(0, 60), box: label, characters: width / advance, lines});
  }
  return found;
}"""


def cramped_texts(page, characters: int = 8) -> list[str]:
    """Texts that wrap in a box narrower than `characters` of their own font (a column squeezed to a word or a
    letter a line), each as "box: text (n characters a line)"; [] when every wrapped text has room to be read."""
    return [
        f"{found['box']}: {found['text']!r} ({found['characters']:.0f} characters a line)"
        for found in page.evaluate(_WRAPPED_TEXTS)
        if found["characters"] < characters
    ]

"""Driving the browser as a person would."""

from tests.builders.people import PASSWORD


def sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def signed_in_tab(browser, live_server, person, lands_on: str, *, javascript: bool = True):
    """A tab of its own for `person`, signed in and landed on `lands_on`, collecting the console's errors."""
    tab = browser.new_context(base_url=live_server.url, java_script_enabled=javascript).new_page()
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

"""Driving the browser as a person would."""


def sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def sideways_scroll(page) -> int:
    """How far the page itself scrolls sideways, in CSS pixels (0 when everything fits the window)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def widths(page, selector: str) -> list[float]:
    """The rendered widths of every element `selector` matches, in CSS pixels."""
    return page.eval_on_selector_all(selector, "els => els.map(el => el.getBoundingClientRect().width)")

import pytest

from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_signs_in_and_reaches_the_queue_with_htmx_and_csp(page, operator):
    responses = []
    page.on("response", lambda response: responses.append(response))
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")
    assert page.locator("h1").inner_text() == "Review queue"
    assert page.evaluate("typeof window.htmx !== 'undefined' && window.htmx.version.startsWith('2.')")
    queue_response = next(r for r in responses if r.url.endswith("/queue/"))
    assert "script-src 'self'" in queue_response.headers["content-security-policy"]
    assert page.console_errors == []

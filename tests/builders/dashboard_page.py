"""The dashboard page as a browser shows it: the page loads some of its cards apart (htmx, on load), each a request
of its own whose answer takes the place of the card's placeholder."""

import re
from html import unescape

from django.test import Client


def card_loaded(client: Client, page: str, card_id: str) -> str:
    """What the page's placeholder of `card_id` loads, asked as htmx asks it."""
    url = re.search(f'id="{card_id}" hx-get="([^"]+)" hx-trigger="load"', page).group(1)
    return client.get(unescape(url), HTTP_HX_REQUEST="true").content.decode()

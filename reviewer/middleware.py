"""Middleware of the product's own."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control


def private_responses(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """`Cache-Control: no-store, private` on every answer to a signed-in person or to a request carrying an API key:
    pages, htmx partials, exports, redirects and errors. What they were shown (drafts, conversations, figures)
    must not stay in a shared browser's cache, or a proxy's, after they sign out. Anonymous answers (the sign-in
    page, static files) are left to their views."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if "HTTP_AUTHORIZATION" in request.META or request.user.is_authenticated:
            patch_cache_control(response, no_store=True, private=True)
        return response

    return middleware

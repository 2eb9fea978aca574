"""Where a page's code lives: every URL Tollgate serves itself is answered by a view in a module named `views` (or in
a `views` package), so a newcomer looking for a page opens that file, never a module named like a service."""

import functools

from django.urls import URLPattern, URLResolver, get_resolver


def _patterns(resolver: URLResolver):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern)
        elif isinstance(pattern, URLPattern):
            yield pattern


def _defined_in(pattern: URLPattern) -> str:
    view = pattern.callback
    while isinstance(view, functools.partial):
        view = view.func
    return getattr(view, "view_class", view).__module__


def test_it_serves_every_page_from_a_views_module():
    ours = [(pattern.name, _defined_in(pattern)) for pattern in _patterns(get_resolver())]
    ours = [(name, module) for name, module in ours if module.split(".")[0] in ("grading", "reviewer")]
    assert len(ours) > 40  # the pages of every package, not an empty walk
    assert [(name, module) for name, module in ours if "views" not in module.split(".")] == []

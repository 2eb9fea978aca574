"""The dashboard's pages, one module per part: the dashboard with its lists, exports and a reader's page of each item
(`dashboard`), the comparison of two slices (`compare`), and the corrections' panel, lists and exports
(`corrections`); and what they share, the page that refuses a filter (`bad_filter`)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def bad_filter(request: HttpRequest, field: str, message: str) -> HttpResponse:
    """A filter or scope the dashboard's pages cannot read: a 400 page naming the field and what it must be."""
    context = {"field": field, "message": message, "nav_active": "dashboard"}
    return render(request, "reviewer/dashboards/bad_filter.html", context, status=400)

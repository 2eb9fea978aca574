"""Costs as people read them: the ledger keeps whole micros, a page shows money with its currency named."""

from django import template

from grading.reviews import spend

register = template.Library()


@register.filter
def money(micros: int | None) -> str:
    """`micros` as money ("1.23 USD"), or a dash when there is no figure (no cap on cost, no price known)."""
    return "—" if micros is None else spend.money(micros)

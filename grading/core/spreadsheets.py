"""Every CSV the product writes, safe to open in a spreadsheet (OWASP, "CSV Injection").

Pipelines choose external ids and application names and operators write notes; a spreadsheet runs a cell that
starts with `=`, `+`, `-`, `@`, TAB or CR as a formula when a stakeholder opens the file. Such a text cell goes
out with a single quote in front and is otherwise unchanged.

The rule is by type, not by content: a value that reaches the writer as a number (int, float, Decimal, bool) is
one we wrote from a typed column (an id, a score, a token count) and stays a number, so a score of -0.5 is still
-0.5; every str is text from somewhere, so a pipeline's id "-0.5" becomes '-0.5. Text is always quoted and numbers
never are (QUOTE_NONNUMERIC): a separator inside text, such as the ";" of locales that separate cells with it,
can then never start a cell of its own.
"""

import csv
from collections.abc import Iterable, Iterator
from decimal import Decimal

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> object:
    """The value as a CSV cell: None and numbers as they are, anything else as text, quoted out of a formula."""
    if value.__class__ is str:  # most cells: asked first, as cheaply as Python can ask (an export writes millions)
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    if value is None or isinstance(value, int | float | Decimal):
        return value
    text = value if isinstance(value, str) else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class _Line:
    """A file-like object whose write returns what was written: csv.writer then yields one line at a time."""

    def write(self, text: str) -> str:
        return text


def csv_lines(rows: Iterable[Iterable[object]]) -> Iterator[str]:
    """One CSV line per row (the header is a row), each cell through `spreadsheet_cell`, for streaming."""
    writer = csv.writer(_Line(), quoting=csv.QUOTE_NONNUMERIC)
    for row in rows:
        yield writer.writerow(map(spreadsheet_cell, row))

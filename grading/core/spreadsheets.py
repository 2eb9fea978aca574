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


def csv_lines(rows: Iterable[Iterable[object]]) -> Iterator[str]:
    """One CSV line per row (the header is a row), each cell through `spreadsheet_cell`, for streaming: the line
    csv.writer writes in its excel dialect with QUOTE_NONNUMERIC, composed here instead, since its cell-by-cell,
    character-by-character scan was most of an export's CPU (bench/README.md). Under that quoting every text is
    quoted, so nothing in it but a quote needs a change (doubled); numbers go bare, None as an empty text."""
    for row in rows:
        yield ",".join(map(_written, row)) + "\r\n"


def _written(value: object) -> str:
    """A cell as its line holds it."""
    if value.__class__ is str:  # `spreadsheet_cell`'s first question, asked here to spare most cells the call
        return '"' + ("'" + value if value.startswith(FORMULA_STARTS) else value).replace('"', '""') + '"'
    value = spreadsheet_cell(value)
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    return '""' if value is None else str(value)

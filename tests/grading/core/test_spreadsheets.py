"""The one CSV writer of the product: cells a spreadsheet would run as formulas are neutralised as OWASP says, and
no other code writes CSV around it."""

import csv
import io
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.core.spreadsheets import csv_lines, spreadsheet_cell

REPO = Path(__file__).resolve().parents[3]
# What reaches a CSV: text of any kind (quotes, separators, line breaks, formula starts), numbers, None, and values
# written as their text (a date, say).
CELLS = st.one_of(
    st.text(),
    st.sampled_from(['"', '""', ",", "\r\n", "\n", "=1+1", "-2", "'", ";", 'a"b,c\nd']),
    st.integers(),
    st.floats(),
    st.decimals(),
    st.booleans(),
    st.none(),
    st.dates(),
)


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "-", "=", "'"])
def test_it_puts_a_quote_before_text_a_spreadsheet_could_run_or_strip(text):
    expected = "'" + text if text[0] in "=+-@\t\r" else text
    assert spreadsheet_cell(text) == expected


@pytest.mark.parametrize("value", [-0.5, 0, -3, Decimal("-1.25"), True, None, float("-inf")])
def test_it_keeps_numbers_we_write_as_numbers(value):
    assert spreadsheet_cell(value) is value


def test_it_writes_text_quoted_and_numbers_bare_so_a_semicolon_cannot_start_a_cell():
    """A spreadsheet in a locale whose separator is ";" would split an unquoted `a;=1+1` into a formula cell."""
    [line] = csv_lines([["a;=1+1", -0.5, None, 'say "hi"', "=x,y"]])
    assert line == '"a;=1+1",-0.5,"","say ""hi""","\'=x,y"\r\n'
    [cells] = csv.reader(io.StringIO(line), quoting=csv.QUOTE_NONNUMERIC)
    assert cells == ["a;=1+1", -0.5, "", 'say "hi"', "'=x,y"]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(CELLS, max_size=8), max_size=3))
def test_it_writes_the_lines_csv_writer_writes(rows):
    """The lines are composed here rather than by csv.writer (faster), byte for byte as it writes them."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_NONNUMERIC).writerows([map(spreadsheet_cell, row) for row in rows])
    assert "".join(csv_lines(rows)) == out.getvalue()


def test_it_is_the_only_csv_writer_in_the_product():
    """No code of the product writes CSV but `csv_lines`, which composes its lines itself (csv.writer's, above)."""
    writers = re.compile(r"csv\.(writer|DictWriter)\(")
    found = [
        str(path.relative_to(REPO))
        for package in ("grading", "reviewer")
        for path in (REPO / package).rglob("*.py")
        if writers.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []

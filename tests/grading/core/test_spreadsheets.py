"""The one CSV writer of the product: cells a spreadsheet would run as formulas are neutralised as OWASP says, and
no other code writes CSV around it."""

import csv
import io
import re
from decimal import Decimal
from pathlib import Path

import pytest

from grading.core.spreadsheets import csv_lines, spreadsheet_cell

REPO = Path(__file__).resolve().parents[3]


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


def test_it_is_the_only_csv_writer_in_the_product():
    writers = re.compile(r"csv\.(writer|DictWriter)\(")
    found = [
        str(path.relative_to(REPO))
        for package in ("grading", "reviewer")
        for path in (REPO / package).rglob("*.py")
        if writers.search(path.read_text(encoding="utf-8"))
    ]
    assert found == ["grading/core/spreadsheets.py"]

"""Hypothesis strategies for hostile input (issue 11, Build 6), shared by the API and importer tests.

Ids, text, times and numbers that have broken systems like this one: control characters, NUL, lone surrogates,
bidi overrides and zero-width characters, "/" and dot segments, numbers JSON has no words for, and times at and
past the edges of what PostgreSQL and Python can hold.
"""

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

NASTY_STRINGS = [
    "",
    " ",
    "/",
    "a/b",
    ".",
    "..",
    "%2F",
    "\x00",
    "nul\x00inside",
    "\ud800",  # a lone surrogate: JSON can carry it as \ud800, UTF-8 cannot store it
    "\x1b[31mred",
    "tab\there",
    "line\nbreak",
    "\u202eevil",
    "zero\u200bwidth",
    "soft\u00adhyphen",
    "\ufeffbom",
    "ש\u200fלום",
    "e\u0301",
    "🇫🇷👩\u200d💻",
    "de&#x2014;lve",
    "<script>alert(1)</script>",
    "x" * 201,  # one over the id limit
    "x" * 200,
]

# Every code point, surrogates and controls included: st.text() leaves surrogates out by default.
any_character = st.characters(exclude_categories=())
hostile_text = st.one_of(st.sampled_from(NASTY_STRINGS), st.text(any_character, max_size=40))
hostile_ids = st.one_of(st.sampled_from(NASTY_STRINGS), st.text(any_character, min_size=1, max_size=12))

# NaN and infinities come out of json.dumps as the non-JSON tokens NaN and Infinity; 1e400 reads back as infinity.
numbers = st.one_of(
    st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.just(float("nan")), st.just(10**400)
)
json_leaves = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(hostile_text, children, max_size=3),
    max_leaves=8,
)

OFFSETS = [timezone(timedelta(hours=hours)) for hours in (-14, -12, -1, 0, 1, 5.5, 12, 14)]
# Times across the whole range Python can write, in the offsets ISO-8601 allows: some fall outside the years 1 to
# 9999 once in UTC, where PostgreSQL would still store them and Python could never read them back.
times = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.sampled_from(OFFSETS)
)
time_values = st.one_of(
    st.none(),
    times.map(datetime.isoformat),
    st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-14:00", "yesterday", "2026-13-01", ""]),
    numbers,
)


def in_storable_range(iso: str) -> bool:
    try:
        datetime.fromisoformat(iso).astimezone(UTC)
    except (OverflowError, ValueError):
        return False
    return True


# --- for any parameter or field of a route (tests/resilience/test_hostile_routes.py) ------------------------------
# What every slot meets once: NUL, a lone surrogate, white space alone, text past any limit.
EDGE_TEXT = ["nul\x00inside", "\ud800", " \t", "x" * 10_001]
# Where a time goes: past the years 1 to 9999 once in UTC, at their very edges, and with no zone.
EDGE_TIMES = [
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00Z",
    "2999-01-01T09:00:00",
]
EDGE_NUMBERS = [-1, 0, 2**63, -(2**63) - 1, 10**30, 1.5]
# A parameter is text whatever it means: weeks at and past the first and the last, the last day (a range's end is
# the instant after it), times, and numbers past 64 bits.
EDGE_PARAMETERS = [
    "0001-W01",
    "9999-W52",
    "0001-01-01",
    "9999-12-31",
    *EDGE_TIMES[:2],
    EDGE_TIMES[4],
    "99999999999999999999",
    "-1",
]
HOSTILE_TIMES = [*EDGE_TIMES, "9999-12-31", "0001-01-01", "10000-01-01T00:00:00Z", "2026-02-30T00:00:00Z",
                 "2026-12-04T16:20:00+24:00", "yesterday"]  # fmt: skip
HOSTILE_WEEKS = ["0001-W01", "9999-W51", "9999-W52", "10000-W01", "0000-W01", "2025-W53", "2026-W00", "٢٠٢٦-W41"]
HOSTILE_NUMBERS = [*EDGE_NUMBERS, 10**400, 1e308, float("nan"), "1e400", "-0", "١٢"]
WRONG_TYPES = [None, True, [], {}, ["x"], {"a": 1}, 1.5]
# Anything at all, for any slot: text, times, weeks, numbers and values of the wrong type.
any_hostile_value = st.one_of(
    st.sampled_from(NASTY_STRINGS + EDGE_TEXT + ["\u3000", "é" * 301]),
    st.sampled_from(HOSTILE_TIMES),
    times.map(datetime.isoformat),
    st.sampled_from(HOSTILE_WEEKS),
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(WRONG_TYPES),
    hostile_text,
)

"""The expressions the figures' rules are written in (grading/figures/definitions.py). Each knows two forms of
itself: Python over a review read as a dict (a closure compiled once), and SQL over the same columns; the figures'
tests hold the two equal on generated reviews. SQL is assembled from constants of ours, never from a value from
outside.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property
from operator import itemgetter
from typing import Any

# Upper bounds (seconds) of the waiting-time histograms: a median is read off them to within one bucket.
WAIT_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800)
OVER = "more"  # the bucket past the last bound
# A counter's keys are at most this long (Rollup.key1, key2): longer ones are cut. Room for the longest a version's
# checks make: the people's pattern of a category check, nine answers of 32 characters with their counts.
KEY_LENGTH = 400
Row = dict[str, Any]  # a review as the figures read it (see `review_row`), with its decision's, label's, ... fields


def wait_bucket(seconds: int) -> str:
    for bound in WAIT_BUCKETS:
        if seconds <= bound:
            return str(bound)
    return OVER


class Expr:
    """A value or a condition over a row, in Python (`py`) and in SQL (`sql`, over the row's columns).

    The combining expressions give their Python form as `fn`, a closure over their parts' closures: the upkeep
    reads every figure of a review in every grading write, and walking the tree by method calls cost three times
    what the hand-written Python did."""

    def py(self, row: Row) -> Any:
        return self.fn(row)

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        return self.py

    def sql(self) -> str:
        raise NotImplementedError


def sql_literal(value: object) -> str:
    """A constant of ours as SQL: only names and numbers, so it can never close the quote it is written in."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and all(ch.isalnum() or ch == "_" for ch in value):
        return f"'{str.__str__(value)}'"
    raise ValueError(f"not a constant of ours: {value!r}")


@dataclass(frozen=True, eq=False)
class Col(Expr):
    """A field of the row: `key` in Python, `column` in SQL."""

    key: str
    column: str

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        return itemgetter(self.key)

    def sql(self) -> str:
        return self.column


def col(name: str) -> Col:
    return Col(name, f"r.{name}")


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    value: str | int | bool

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        value = self.value
        return lambda row: value

    def sql(self) -> str:
        return sql_literal(self.value)


@dataclass(frozen=True, eq=False)
class Eq(Expr):
    left: Expr
    right: Expr

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        left, right = self.left.fn, self.right.fn
        return lambda row: left(row) == right(row)

    def sql(self) -> str:
        return f"{self.left.sql()} = {self.right.sql()}"


@dataclass(frozen=True, eq=False)
class In(Expr):
    value: Expr
    among: tuple[str, ...]

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        value, among = self.value.fn, frozenset(self.among)
        return lambda row: value(row) in among

    def sql(self) -> str:
        return f"{self.value.sql()} IN ({', '.join(map(sql_literal, self.among))})"


@dataclass(frozen=True, eq=False)
class And(Expr):
    parts: tuple[Expr, ...]

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        parts = tuple(part.fn for part in self.parts)

        def every(row: Row) -> bool:
            for part in parts:  # noqa: SIM110 - all() over a generator costs more, in every write
                if not part(row):
                    return False
            return True

        return every

    def sql(self) -> str:
        return "(" + " AND ".join(part.sql() for part in self.parts) + ")"


def both(*parts: Expr) -> And:
    """The conjunction, flattened (so a figure's condition reads as one list of tests in both forms)."""
    flat: list[Expr] = []
    for part in parts:
        flat += part.parts if isinstance(part, And) else [part]
    return And(tuple(flat))


@dataclass(frozen=True, eq=False)
class Present(Expr):
    """The row has a value (not None; not NULL in SQL)."""

    value: Expr

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        value = self.value.fn
        return lambda row: value(row) is not None

    def sql(self) -> str:
        return f"{self.value.sql()} IS NOT NULL"


@dataclass(frozen=True, eq=False)
class AtMost(Expr):
    """`left` is at most `right` (two values never NULL where it is read)."""

    left: Expr
    right: Expr

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        left, right = self.left.fn, self.right.fn
        return lambda row: left(row) <= right(row)

    def sql(self) -> str:
        return f"{self.left.sql()} <= {self.right.sql()}"


@dataclass(frozen=True, eq=False)
class Not(Expr):
    part: Expr  # never NULL in SQL: NOT NULL would not read as True

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        part = self.part.fn
        return lambda row: not part(row)

    def sql(self) -> str:
        return f"NOT {self.part.sql()}"


@dataclass(frozen=True, eq=False)
class Case(Expr):
    when: Expr  # a condition; NULL in SQL reads as false, as None does in Python
    then: Expr
    otherwise: Expr

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        when, then, otherwise = self.when.fn, self.then.fn, self.otherwise.fn
        return lambda row: then(row) if when(row) else otherwise(row)

    def sql(self) -> str:
        return f"CASE WHEN {self.when.sql()} THEN {self.then.sql()} ELSE {self.otherwise.sql()} END"


@dataclass(frozen=True, eq=False)
class Pair(Expr):
    """`left>right`: one cell of a confusion table (the machine's verdict, then the person's)."""

    left: Expr
    right: Expr

    def py(self, row: Row) -> str:
        return f"{self.left.py(row)}>{self.right.py(row)}"

    def sql(self) -> str:
        return f"({self.left.sql()} || '>' || {self.right.sql()})"


@dataclass(frozen=True, eq=False)
class Text(Expr):
    value: Expr

    def py(self, row: Row) -> str:
        return str(self.value.py(row))

    def sql(self) -> str:
        return f"({self.value.sql()})::text"


# What an answer to a check can be, as stored (grading/checks/definitions.py): a verdict (pass, fail, unknown), a
# category key, or a score 1 to 10. Anything else stored where an answer belongs reads unknown, as any string but
# a verdict did when every check was a verdict (such a string is never written: answers are validated first).
ANSWER_SHAPE = r"[a-z][a-z0-9_]{0,31}|[1-9]|10"
_ANSWER = re.compile(ANSWER_SHAPE, re.ASCII)


def _json_object(row: Row, column: str) -> dict:
    """The JSON in `column` as an object: an empty one when it holds anything else (null, a list, a scalar)."""
    value = row[column]
    return value if isinstance(value, dict) else {}


def _verdict_sql(json: str) -> str:
    """The answer at `json` (a jsonb expression): a string of an answer's shape, else unknown."""
    text = f"({json} #>> '{{}}')"
    return f"CASE WHEN jsonb_typeof({json}) = 'string' AND {text} ~ '^({ANSWER_SHAPE})$' THEN {text} ELSE 'unknown' END"


def _verdict(value: object) -> str:
    return value if isinstance(value, str) and _ANSWER.fullmatch(value) else "unknown"


@dataclass(frozen=True, eq=False)
class CheckVerdict(Expr):
    """The machine's answer to a conversation check as the review stores it (`checks[check].verdict`): a verdict,
    a category or a score; anything else reads unknown."""

    check: Expr

    def py(self, row: Row) -> str:
        entry = _json_object(row, "checks").get(self.check.py(row))
        return _verdict(entry.get("verdict") if isinstance(entry, dict) else None)

    def sql(self) -> str:
        return _verdict_sql(f"(r.checks -> {self.check.sql()} -> 'verdict')")


@dataclass(frozen=True, eq=False)
class HumanCheckVerdict(Expr):
    """A person's answer to a conversation check as their decision stores it (`checks[check]`), read as
    CheckVerdict reads the machine's."""

    check: Expr

    def py(self, row: Row) -> str:
        return _verdict(_json_object(row, "human_checks").get(self.check.py(row)))

    def sql(self) -> str:
        return _verdict_sql(f"(r.human_checks -> {self.check.sql()})")


@dataclass(frozen=True, eq=False)
class HasKey(Expr):
    """The JSON in `column` has `key`, as jsonb's `?` reads it: a key of an object, a string in an array, or the
    string itself. (Asking first whether it is an object cost the rebuild a third more database CPU.)"""

    column: str
    key: str

    def py(self, row: Row) -> bool:
        value = row[self.column]
        return self.key in value if isinstance(value, dict | list) else value == self.key

    def sql(self) -> str:
        return f"r.{self.column} ? {sql_literal(self.key)}"


@dataclass(frozen=True, eq=False)
class WholeNumber(Expr):
    """The number at `key` of the JSON object in `column`, its fraction cut off; 0 when absent or null."""

    column: str
    key: str

    def py(self, row: Row) -> int:
        return int(_json_object(row, self.column).get(self.key) or 0)

    def sql(self) -> str:
        return f"COALESCE(trunc((r.{self.column} ->> {sql_literal(self.key)})::numeric), 0)"


@dataclass(frozen=True, eq=False)
class NonEmptyList(Expr):
    """The JSON object in `column` has a list with something in it at `key`."""

    column: str
    key: str

    def py(self, row: Row) -> bool:
        value = _json_object(row, self.column).get(self.key)
        return isinstance(value, list) and bool(value)

    def sql(self) -> str:
        at = f"(r.{self.column} -> {sql_literal(self.key)})"
        # CASE, not AND: PostgreSQL may read either side of an AND first, and a scalar has no length.
        return f"CASE WHEN jsonb_typeof({at}) = 'array' THEN jsonb_array_length({at}) > 0 ELSE FALSE END"


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, eq=False)
class IsNumber(Expr):
    """The JSON object in `column` has a number at `key`."""

    column: str
    key: Expr

    def py(self, row: Row) -> bool:
        return _number(_json_object(row, self.column).get(self.key.py(row)))

    def sql(self) -> str:
        return f"jsonb_typeof(r.{self.column} -> {self.key.sql()}) = 'number'"


@dataclass(frozen=True, eq=False)
class Thousandths(Expr):
    """The number at `key` of the JSON object in `column`, in thousandths, rounded half away from zero (as
    PostgreSQL rounds the numeric the JSON holds; the float read in Python is that numeric's shortest form)."""

    column: str
    key: Expr

    def py(self, row: Row) -> int:
        value = row[self.column][self.key.py(row)]
        exact = Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value)
        return int((exact * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))

    def sql(self) -> str:
        return f"round((r.{self.column} ->> {self.key.sql()})::numeric * 1000)"


@dataclass(frozen=True, eq=False)
class Seconds(Expr):
    """Whole seconds from `earlier` to `later`, never below zero."""

    later: Expr
    earlier: Expr

    def py(self, row: Row) -> int:
        return max(0, int((self.later.py(row) - self.earlier.py(row)).total_seconds()))

    def sql(self) -> str:
        return f"greatest(0, floor(extract(epoch FROM {self.later.sql()} - {self.earlier.sql()})))::bigint"


@dataclass(frozen=True, eq=False)
class Bucket(Expr):
    """The waiting-time bucket (WAIT_BUCKETS) holding a whole number of seconds."""

    seconds: Expr

    def py(self, row: Row) -> str:
        return wait_bucket(self.seconds.py(row))

    def sql(self) -> str:
        # Whole seconds: at most a bound is below the bound plus one, which width_bucket counts in one reading.
        names = ", ".join(sql_literal(name) for name in (*map(str, WAIT_BUCKETS), OVER))
        above = ", ".join(str(bound + 1) for bound in WAIT_BUCKETS)
        return f"(ARRAY[{names}])[width_bucket({self.seconds.sql()}, ARRAY[{above}]::bigint[]) + 1]"


@dataclass(frozen=True, eq=False)
class Stored(Expr):
    """`rule`, which a review's rows carry as `key`, computed once per review: in SQL by _ROW_SQL, in Python by
    `review_row`."""

    rule: Expr
    key: str

    @cached_property
    def fn(self) -> Callable[[Row], Any]:
        return itemgetter(self.key)

    def sql(self) -> str:
        return f"r.{self.key}"


# The fixed point of a probability in the counters (`FixedPoint`): q = floor(p * 2**32), exact in both forms (the
# float times a power of two is exact, and so is its floor), so booking and unbooking it in integers never drifts
# from a recount. q is at most 2**32, so a cell's sum of q holds 2**31 items in a BigInteger; its square is kept as
# three sums over q's halves (q = hi * 2**16 + lo: q² = hi² * 2**32 + hi * lo * 2**17 + lo²), each at most 2**32 an
# item, which give Σq² exactly (`fixed_point_squares`).
FIXED_POINT_BITS = 32
_HALF_BITS = FIXED_POINT_BITS // 2
FIXED_POINT_PARTS = ("q", "hi2", "hilo", "lo2")


def fixed_point(probability: float) -> int:
    """q of a probability (`FixedPoint`'s Python form)."""
    return math.floor(probability * (1 << FIXED_POINT_BITS))


def fixed_point_squares(hi2: int, hilo: int, lo2: int) -> int:
    """Σq² from the three sums `FixedPoint` keeps of q's halves."""
    return (hi2 << FIXED_POINT_BITS) + (hilo << (_HALF_BITS + 1)) + lo2


@dataclass(frozen=True, eq=False)
class FixedPoint(Expr):
    """The probability in `column` (0 to 1, never NULL where it is read) as the fixed point q (FIXED_POINT_BITS), or
    one of the three products of q's halves whose sums give Σq²: `part` one of FIXED_POINT_PARTS."""

    column: str
    part: str

    def py(self, row: Row) -> int:
        q = fixed_point(row[self.column])
        hi, lo = q >> _HALF_BITS, q & ((1 << _HALF_BITS) - 1)
        return {"q": q, "hi2": hi * hi, "hilo": hi * lo, "lo2": lo * lo}[self.part]

    def sql(self) -> str:
        q = f"floor(r.{self.column} * {1 << FIXED_POINT_BITS})::bigint"
        hi, lo = f"({q} >> {_HALF_BITS})", f"({q} & {(1 << _HALF_BITS) - 1})"
        return {"q": q, "hi2": f"{hi} * {hi}", "hilo": f"{hi} * {lo}", "lo2": f"{lo} * {lo}"}[self.part]

"""The ORM expressions written in plain SQL, all of them: filters and figures the ORM has no word for, composed into
its queries. Why plain SQL: a trial's or an export's thousands of ids as `IN (%s, %s, ...)` cost more to compose and
send than the query takes to run, and what a stored figure was counted from is read from PostgreSQL's own `xmin`,
which no ORM field names (the figures: bench/README.md). And one statement the ORM cannot write, sums over rows it
computes once (`sums_by`). Every value is a parameter or a column."""

from collections.abc import Iterable, Sequence

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import BigIntegerField, BooleanField, CharField, F, Func, IntegerField, JSONField, QuerySet, Value
from django.db.models.functions import Cast


class _InArray(Func):
    """`column = ANY(array)`: one parameter whatever the ids' number."""

    arg_joiner = " = ANY("
    template = "%(expressions)s)"
    output_field = BooleanField()


def id_in(column: str, ids: Iterable[int]) -> Func:
    """A filter: `column` is one of `ids`, sent as one array parameter. A trial's thousands of ids as
    `IN (%s, %s, ...)` cost more to compose and send than the query takes to run; as an array of Python ints, each
    id still went through Django's and psycopg's adaptation one by one, so they go as one array literal cast in SQL."""
    literal = "{" + ",".join(str(int(i)) for i in ids) + "}"
    return _InArray(F(column), Cast(Value(literal), output_field=ArrayField(BigIntegerField())))


class JsonArrayLength(Func):
    function = "jsonb_array_length"
    output_field = IntegerField()


def json_array_slice(column: str, positions: range) -> Func:
    """The elements of the JSON array `column` at `positions`, sliced by the database."""
    path = f"$[{positions.start} to {positions.stop - 1}]" if positions else "$[0 to -1]"
    return Func(F(column), Value(path), function="jsonb_path_query_array", output_field=JSONField())


class RowsWritten(Func):
    """Of the rows its query finds: how many, and the sum of their `xmin` (the transaction that last wrote each row,
    PostgreSQL's own column): a row added, removed or changed by any writer, in any column, moves it. Not an
    aggregate to Django, so the subquery gets no GROUP BY and answers one row."""

    output_field = CharField()

    def as_sql(self, compiler, connection, **extra_context):
        table = compiler.quote_name_unless_alias(compiler.query.get_initial_alias())
        return f"count(*) || ':' || coalesce(sum({table}.xmin::text::bigint), 0)", []


class RowsAndSum(Func):
    """Of the rows its query finds: how many, and the sum of the number `expression` holds on them, one row also
    when there are none ("0:0"). Not an aggregate to Django, so the subquery gets no GROUP BY."""

    template = "count(*) || ':' || coalesce(sum(%(expressions)s), 0)"
    output_field = CharField()


# The ORM writes an aggregate's argument out whole in each aggregate, and PostgreSQL evaluates each apart (the
# certified panel's pass probability five times a row: 1.7 s of its CPU over 600,000 conversations, against 0.7 s
# once): so the rows are a subquery it does not fold into the aggregates (OFFSET 0). The rows' SELECT is the ORM's,
# with its parameters; the rest is the caller's column names.
_SUMS_SQL = """SELECT {by}, count({value}), sum({value}), sum({value} * {value}), min({value}), max({value}){flags}
    FROM ({rows} OFFSET 0) AS rows GROUP BY {by}"""


def sums_by(rows: QuerySet, *, by: Sequence[str], value: str, flags: Sequence[str]) -> list[tuple]:
    """Per group of `rows` (a `.values()` query naming `by`, `value` and `flags`) by the columns `by`: the group's
    columns, then of `value` where not null its count, sum, sum of squares, least and greatest, then how many rows
    each boolean column of `flags` holds true. Each row's `value` is computed once, however many sums read it."""
    if rows.query.is_empty():
        return []
    sql, params = rows.order_by().query.sql_with_params()
    counted = "".join(f", count(*) FILTER (WHERE {flag})" for flag in flags)
    with connection.cursor() as cursor:
        cursor.execute(_SUMS_SQL.format(by=", ".join(by), value=value, flags=counted, rows=sql), params)
        return cursor.fetchall()

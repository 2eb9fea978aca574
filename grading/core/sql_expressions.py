"""The ORM expressions written in plain SQL, all of them: filters and figures the ORM has no word for, composed into
its queries. Why plain SQL: a trial's or an export's thousands of ids as `IN (%s, %s, ...)` cost more to compose and
send than the query takes to run, and what a stored figure was counted from is read from PostgreSQL's own `xmin`,
which no ORM field names (the figures: bench/README.md). Every value is a parameter or a column."""

from collections.abc import Iterable

from django.contrib.postgres.fields import ArrayField
from django.db.models import BigIntegerField, BooleanField, CharField, F, Func, IntegerField, JSONField, Value
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

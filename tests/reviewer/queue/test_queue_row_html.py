"""A queue row's HTML is written in Python (`display.row_html`), not by the list template's loop: for any values a
row can hold, it is the HTML that loop wrote, byte for byte."""

from django.template import engines
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.queue.display import QueueRow, row_html
from tests.builders.hostile_values import hostile_text

# The list template's loop over the rows as it was, before the rows were written in Python.
TEMPLATE_LOOP = """{% load untrusted %}{% for row in rows %}
      <tr data-row="{{ row.review_id }}"{% if row.mine %} class="mine"{% elif row.not_claimable %} class="passed-over"{% endif %}>
        <td><a href="{{ row.url }}" data-open>{{ row.title|untrusted }}</a> <span class="sub">{{ row.context|untrusted }}</span></td>
        <td data-label="kind">{{ row.kind }}</td>
        <td data-label="why"><span class="pill{% if row.blind %}{% elif row.reason == 'unknown_check' %} unknown{% else %} human{% endif %}">{{ row.reason_label }}</span>{% if row.places %} <span class="pill{% if row.places == 'awaiting adjudication' %} unknown{% endif %}" data-places>{{ row.places }}</span>{% endif %}{% if row.assigned %} <span class="pill" data-assigned>for {{ row.assigned }}</span>{% endif %}</td>
        <td data-label="the machine said" class="said">{% if row.summary %}{{ row.summary }}{% if row.checks %} · {% endif %}{% endif %}{% for name, answer, reads_as in row.checks %}{{ name }} <b class="{{ reads_as }}">{{ answer }}</b>{% if not forloop.last %} · {% endif %}{% endfor %}</td>
        <td data-label="criteria">{{ row.criteria_label }}</td>
        <td data-label="waiting">{{ row.waiting }}{% if row.due %}<br><span class="{% if row.overdue %}fail{% else %}sub{% endif %}" data-due>{{ row.due }}</span>{% endif %}</td>
        <td data-label="held by">{{ row.held_by }}{% if row.not_claimable and not row.mine %}{% if row.held_by %}<br>{% endif %}<span class="note" data-passed-over>claim next passes it: {{ row.not_claimable }}</span>{% endif %}</td>
      </tr>
    {% endfor %}"""  # noqa: E501
# The list template's loop now.
PYTHON_LOOP = "{% for row in rows %}\n      {{ row }}\n    {% endfor %}"

texts = st.one_of(hostile_text, st.sampled_from(["", "awaiting adjudication", "unknown_check", "pass", "fail"]))
rows = st.builds(
    QueueRow,
    review_id=st.integers(min_value=1, max_value=2**31 - 1),
    url=texts,
    kind=texts,
    reason=texts,
    blind=st.booleans(),
    title=texts,
    context=texts,
    reason_label=texts,
    summary=texts,
    checks=st.lists(st.tuples(texts, texts, texts), max_size=3),
    criteria_label=texts,
    waiting=texts,
    mine=st.booleans(),
    held_by=texts,
    places=texts,
    assigned=texts,
    due=texts,
    overdue=st.booleans(),
    not_claimable=texts,
)


@settings(max_examples=12, deadline=None)
@given(st.lists(rows, max_size=3))
def test_it_writes_each_row_as_the_templates_loop_did_for_any_values(queue_rows):
    engine = engines["django"]
    was = engine.from_string(TEMPLATE_LOOP).render({"rows": [vars(row) for row in queue_rows]})
    now = engine.from_string(PYTHON_LOOP).render({"rows": [row_html(row) for row in queue_rows]})
    assert now == was

"""The dashboard's quality table writes its row of each application in Python (`display.application_rows`), not by
the page template's loop: for any values a row can hold, it is the HTML that loop wrote, byte for byte."""

from django.template import engines
from django.utils.safestring import mark_safe
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.dashboards.display import Linked, application_rows
from tests.builders.hostile_values import hostile_text

# The page template's loop over the applications as it was, before the rows were written in Python.
TEMPLATE_LOOP = """{% load untrusted %}<tbody>
  {% for row in applications %}
    <tr><td>{{ row.application|untrusted }}</td>
      <td><a href="{{ row.passed_link }}">{{ row.passed }}</a> / <a href="{{ row.resolved_link }}">{{ row.resolved }}</a> <span class="note">{{ row.quality_label }}</span></td>
      <td class="unknown"><a href="{{ row.unknown_link }}">{{ row.unknown }}</a> of {{ row.scored }}</td>
      {% for c in row.check_cells %}<td>{% for cell in c.cells %}<a href="{{ cell.url }}">{{ cell.value }}</a>{% if not forloop.last %} · {% endif %}{% endfor %}</td>{% endfor %}
      <td>{{ row.thumbs }}</td></tr>
  {% empty %}
    <tr><td colspan="7" class="empty">No graded conversations in these weeks.</td></tr>
  {% endfor %}
  </tbody>"""  # noqa: E501
# The page template now.
PYTHON_ROWS = """<tbody>
  {% if applications %}{{ rows }}{% else %}
    <tr><td colspan="7" class="empty">No graded conversations in these weeks.</td></tr>
  {% endif %}
  </tbody>"""

counts = st.integers(min_value=0, max_value=10**9)
# A `Links` URL: ready for an attribute (the template printed it as it is).
urls = hostile_text.map(mark_safe)
cells = st.builds(Linked, value=counts, url=urls)
rows = st.fixed_dictionaries({
    "application": hostile_text,
    "passed": counts, "resolved": counts, "unknown": counts, "scored": counts,
    "passed_link": urls, "resolved_link": urls, "unknown_link": urls,
    "quality_label": st.one_of(hostile_text, st.sampled_from(["–", "67%"])),
    "thumbs": st.one_of(hostile_text, st.sampled_from(["3 / 1"])),
    "check_cells": st.lists(st.fixed_dictionaries({"cells": st.lists(cells, max_size=3)}), max_size=3),
})  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(st.lists(rows, max_size=3))
def test_it_writes_each_application_row_as_the_templates_loop_did_for_any_values(applications):
    engine = engines["django"]
    was = engine.from_string(TEMPLATE_LOOP).render({"applications": applications})
    now = engine.from_string(PYTHON_ROWS).render({"applications": applications, "rows": application_rows(applications)})
    assert now == was

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading.core.evidence import (
    FINGERPRINT_SCHEME,
    REASON_TEXT,
    EvidenceMessage,
    NotScorable,
    active_path,
    branch_count,
    canonical_message,
    fingerprint,
    not_scorable_reason,
    prefix_fingerprints,
    unanswered_tool_call_ids,
)
from grading.core.evidence_text import (
    CONTEXT_SHARE,
    combine_stage_verdicts,
    estimate_tokens,
    message_size,
    render_message,
    render_messages,
    stages,
)
from grading.core.untrusted import new_nonce
from tests.builders.evidence import abandoned_message_ids, rendered_size
from tests.builders.message_trees import message_trees, tool_call

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=1)
QUIET_PERIOD = timedelta(minutes=30)  # CONVERSATION_QUIET_MINUTES by default
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def msg(id: str, parent_id: str | None, role: str = "user", content: object = "hi", **fields) -> EvidenceMessage:
    return EvidenceMessage(id=id, parent_id=parent_id, role=role, content=content, **fields)


def chain(*specs: tuple[str, str, object]) -> list[EvidenceMessage]:
    """Linear messages from (id, role, content), each the child of the one before, one minute apart."""
    messages = []
    parent = None
    for n, (id, role, content) in enumerate(specs):
        messages.append(msg(id, parent, role, content, created_at=T0 + timedelta(minutes=n)))
        parent = id
    return messages


def reason(path, *, closed=True, last_activity=T0, quiet_period=QUIET_PERIOD, path_problem=None, content_awaited=False):
    return not_scorable_reason(
        path,
        closed=closed,
        last_activity=last_activity,
        now=NOW,
        quiet_period=quiet_period,
        path_problem=path_problem,
        content_awaited=content_awaited,
    )


def path_of(messages, active_leaf_id=None):
    result = active_path(messages, active_leaf_id)
    assert result.problem is None
    return result.path


# --- fingerprint --------------------------------------------------------------------------------------------


def test_it_matches_the_golden_fingerprint_computed_by_the_published_recipe():
    path = [
        msg("u1", None, "user", "café ✓ bitte"),
        msg(
            "a1",
            "u1",
            "assistant",
            None,
            tool_calls=[tool_call("call_1", "menu", '{"dish": "crème brûlée"}')],
        ),
        msg("t1", "a1", "tool", [{"type": "text", "text": "ok"}], tool_call_id="call_1", name="menu"),
    ]
    expected_objects = [
        {
            "id": "u1",
            "role": "user",
            "content": "café ✓ bitte",
            "tool_calls": None,
            "tool_call_id": None,
            "name": None,
        },
        {
            "id": "a1",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "menu", "arguments": '{"dish": "crème brûlée"}'},
                }
            ],
            "tool_call_id": None,
            "name": None,
        },
        {
            "id": "t1",
            "role": "tool",
            "content": [{"type": "text", "text": "ok"}],
            "tool_calls": None,
            "tool_call_id": "call_1",
            "name": "menu",
        },
    ]
    payload = json.dumps(expected_objects, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "café ✓" in payload  # non-ASCII kept as itself, not \u-escaped
    expected = "fp1:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()

    assert fingerprint(path) == expected
    # Pinned as well, so a change to the scheme cannot slip through by changing both sides of the comparison.
    assert expected == "fp1:2ef9e9c1c2b1f6a5083f5efd4ddb20d03815cb335b624a62d3d8853813ed9b43"
    assert FINGERPRINT_SCHEME == "fp1"


def test_it_builds_canonical_messages_with_exactly_the_evidence_keys():
    m = msg("m1", None, "user", "hi", created_at=T0, hidden=True, truncated=True)

    assert canonical_message(m) == {
        "content": "hi",
        "id": "m1",
        "name": None,
        "role": "user",
        "tool_call_id": None,
        "tool_calls": None,
    }


def test_it_changes_the_fingerprint_for_a_new_user_message():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))
    before = fingerprint(path_of(messages))

    messages.append(msg("u2", "a1", "user", "and then?", created_at=T0 + timedelta(hours=1)))

    assert fingerprint(path_of(messages)) != before


def test_it_changes_the_fingerprint_for_an_edit_on_the_active_branch():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))
    before = fingerprint(path_of(messages))

    messages[0] = replace(messages[0], content="hi!")

    assert fingerprint(path_of(messages)) != before


def test_it_changes_the_fingerprint_for_a_longer_tool_result():
    messages = [
        msg("u1", None, "user", "weather?"),
        msg("a1", "u1", "assistant", None, tool_calls=[tool_call("c1")]),
        msg("t1", "a1", "tool", "sunny", tool_call_id="c1"),
    ]
    before = fingerprint(path_of(messages, "t1"))

    messages[2] = replace(messages[2], content="sunny, 21 degrees")

    assert fingerprint(path_of(messages, "t1")) != before


def test_it_keeps_the_fingerprint_when_an_abandoned_branch_changes():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "first try"), ("u2", "user", "thanks"))
    messages.append(msg("a1b", "u1", "assistant", "regenerated", created_at=T0))  # older sibling branch
    path = path_of(messages)
    before = fingerprint(path)
    assert [m.id for m in path] == ["u1", "a1", "u2"]
    assert abandoned_message_ids(messages, path) == {"a1b"}

    messages[-1] = replace(messages[-1], content="regenerated, differently")
    messages.append(msg("u3b", "a1b", "user", "more on the old branch", created_at=T0))

    assert fingerprint(path_of(messages, "u2")) == before


def test_it_covers_user_and_tool_messages():
    messages = [
        msg("u1", None, "user", "look it up"),
        msg("a1", "u1", "assistant", None, tool_calls=[tool_call("c1")]),
        msg("t1", "a1", "tool", "result", tool_call_id="c1"),
        msg("a2", "t1", "assistant", "done"),
    ]
    before = fingerprint(messages)

    assert fingerprint([replace(messages[0], content="look it up!"), *messages[1:]]) != before
    assert fingerprint([*messages[:2], replace(messages[2], content="other"), messages[3]]) != before
    assert fingerprint([*messages[:2], replace(messages[2], tool_call_id="c2"), messages[3]]) != before
    assert fingerprint([*messages[:2], replace(messages[2], name="search"), messages[3]]) != before


def test_it_hashes_content_longer_than_100000_chars_in_full():
    long = "x" * 150_000
    path = [msg("u1", None, "user", long + "a")]

    assert fingerprint(path) != fingerprint([msg("u1", None, "user", long + "b")])


def test_it_ignores_fields_the_judge_never_reads():
    m = msg("u1", None, "user", "hi")
    variant = replace(m, created_at=T0, hidden=True, truncated=True)

    assert fingerprint([m]) == fingerprint([variant])
    assert render_message(m) == render_message(variant)


# --- active path --------------------------------------------------------------------------------------------


def test_it_walks_a_100000_message_chain_without_recursion():
    messages = [msg("m0", None, "user", "start")]
    messages += [msg(f"m{n}", f"m{n - 1}", "assistant" if n % 2 else "user", "x") for n in range(1, 100_000)]

    default = active_path(messages, None)
    explicit = active_path(messages, "m99999")

    assert default.problem is None
    assert len(default.path) == 100_000
    assert default.path[0].id == "m0"
    assert default.path[-1].id == "m99999"
    assert explicit.path == default.path
    assert branch_count(messages) == 1
    assert fingerprint(default.path).startswith("fp1:")


def test_it_defaults_to_the_newest_leaf_by_created_at():
    messages = [
        msg("root", None, "user", "q", created_at=T0),
        msg("old", "root", "assistant", "a", created_at=T0 + timedelta(minutes=5)),
        msg("new", "root", "assistant", "b", created_at=T0 + timedelta(minutes=9)),
        msg("undated", "root", "assistant", "c"),
    ]

    assert [m.id for m in path_of(messages)] == ["root", "new"]
    assert branch_count(messages) == 3


def test_it_breaks_created_at_ties_with_the_greatest_id():
    messages = [
        msg("root", None, "user", "q", created_at=T0),
        msg("b", "root", "assistant", "a", created_at=T0),
        msg("c", "root", "assistant", "a", created_at=T0),
        msg("a", "root", "assistant", "a", created_at=T0),
    ]

    assert path_of(messages)[-1].id == "c"
    assert path_of(list(reversed(messages)))[-1].id == "c"


def test_it_treats_undated_leaves_as_oldest_and_then_uses_the_id():
    messages = [msg("root", None), msg("x", "root", "assistant"), msg("y", "root", "assistant")]

    assert path_of(messages)[-1].id == "y"


def test_it_honours_an_active_message_that_has_children():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"), ("u2", "user", "more"))

    assert [m.id for m in path_of(messages, "a1")] == ["u1", "a1"]


def test_it_counts_branches():
    assert branch_count([]) == 0
    assert branch_count(chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))) == 1
    assert branch_count([msg("u1", None), msg("a", "u1"), msg("b", "u1"), msg("c", "b")]) == 2


# --- not scorable -------------------------------------------------------------------------------------------


def test_it_reports_an_empty_conversation():
    result = active_path([], None)

    assert result.path == []
    assert result.problem == NotScorable.EMPTY
    assert reason(result.path, path_problem=result.problem) == NotScorable.EMPTY
    assert reason([]) == NotScorable.EMPTY


def test_it_reports_duplicate_ids():
    result = active_path([msg("u1", None), msg("a1", "u1"), msg("a1", "u1", "assistant", "again")], None)

    assert result.problem == NotScorable.DUPLICATE_ID
    assert reason(result.path, path_problem=result.problem) == NotScorable.DUPLICATE_ID


def test_it_reports_an_unknown_active_message():
    result = active_path([msg("u1", None)], "nope")

    assert result.problem == NotScorable.UNKNOWN_ACTIVE_MESSAGE
    assert reason(result.path, path_problem=result.problem) == NotScorable.UNKNOWN_ACTIVE_MESSAGE


def test_it_reports_a_parent_that_does_not_resolve():
    result = active_path([msg("a1", "ghost", "assistant"), msg("u2", "a1")], None)

    assert result.problem == NotScorable.UNRESOLVED_PARENT
    assert [m.id for m in result.path] == ["a1", "u2"]  # what could be walked, for display
    assert reason(result.path, path_problem=result.problem) == NotScorable.UNRESOLVED_PARENT


def test_it_reports_a_cycle_on_the_active_path():
    messages = [msg("a", "c"), msg("b", "a"), msg("c", "b"), msg("leaf", "c")]

    result = active_path(messages, None)

    assert result.problem == NotScorable.CYCLE
    assert reason(result.path, path_problem=result.problem) == NotScorable.CYCLE


def test_it_reports_a_cycle_when_there_is_no_leaf_at_all():
    assert active_path([msg("a", "b"), msg("b", "a")], None).problem == NotScorable.CYCLE
    assert active_path([msg("self", "self")], None).problem == NotScorable.CYCLE
    assert active_path([msg("self", "self")], "self").problem == NotScorable.CYCLE


def test_it_ignores_an_orphan_on_an_abandoned_branch():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))
    messages.append(msg("stray", "ghost", "assistant", "lost", created_at=T0 - timedelta(days=1)))

    assert [m.id for m in path_of(messages)] == ["u1", "a1"]


def test_it_reports_content_truncated_by_the_source():
    path = [msg("u1", None), msg("a1", "u1", "assistant", "partial…", truncated=True)]

    assert reason(path) == NotScorable.TRUNCATED_BY_SOURCE
    assert reason(path, closed=False, last_activity=NOW) == NotScorable.TRUNCATED_BY_SOURCE


def test_a_model_call_whose_messages_are_awaited_makes_a_closed_quiet_path_not_scorable():
    path = [msg("u1", None), msg("a1", "u1", "assistant", "hello")]

    assert reason(path) is None
    assert reason(path, content_awaited=True) == NotScorable.CONTENT_AWAITED
    assert reason(path, closed=False, last_activity=NOW, content_awaited=True) == NotScorable.CONTENT_AWAITED
    assert reason([], content_awaited=True) == NotScorable.EMPTY  # an incomplete record is named first


def test_it_reports_a_tool_call_without_result_once_closed_or_quiet():
    path = [
        msg("u1", None),
        msg("a1", "u1", "assistant", None, tool_calls=[tool_call("c1"), tool_call("c2")]),
        msg("t1", "a1", "tool", "one", tool_call_id="c1"),
    ]

    assert unanswered_tool_call_ids(path) == ["c2"]
    assert reason(path, closed=True, last_activity=NOW) == NotScorable.TOOL_CALL_WITHOUT_RESULT
    assert reason(path, closed=False, last_activity=NOW - timedelta(hours=2)) == NotScorable.TOOL_CALL_WITHOUT_RESULT


def test_it_reports_a_tool_call_still_waiting_as_in_progress():
    path = [msg("u1", None), msg("a1", "u1", "assistant", None, tool_calls=[tool_call("c1")])]

    assert reason(path, closed=False, last_activity=NOW - timedelta(minutes=2)) == NotScorable.IN_PROGRESS


def test_it_does_not_count_a_tool_result_that_came_before_its_call():
    path = [
        msg("u1", None),
        msg("t0", "u1", "tool", "early", tool_call_id="c1"),
        msg("a1", "t0", "assistant", None, tool_calls=[tool_call("c1")]),
    ]

    assert reason(path) == NotScorable.TOOL_CALL_WITHOUT_RESULT


def test_it_treats_a_tool_call_without_an_id_as_never_answered():
    path = [
        msg("u1", None),
        msg("a1", "u1", "assistant", None, tool_calls=[{"type": "function", "function": {"name": "f"}}]),
        msg("t1", "a1", "tool", "?", tool_call_id=None),
    ]

    assert unanswered_tool_call_ids(path) == [None]
    assert reason(path) == NotScorable.TOOL_CALL_WITHOUT_RESULT


def test_it_reports_an_open_conversation_with_recent_activity_as_in_progress():
    path = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))

    assert reason(path, closed=False, last_activity=NOW - timedelta(minutes=29)) == NotScorable.IN_PROGRESS
    assert reason(path, closed=False, last_activity=NOW - timedelta(minutes=30)) is None
    assert reason(path, closed=False, last_activity=NOW + timedelta(minutes=1)) == NotScorable.IN_PROGRESS
    assert reason(path, closed=True, last_activity=NOW) is None


def test_it_scores_a_quiet_conversation_that_ends_on_an_unanswered_user_message():
    path = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"), ("u2", "user", "hello?"))

    assert reason(path, closed=False, last_activity=NOW - timedelta(hours=1)) is None
    assert reason(path, closed=False, last_activity=NOW - timedelta(minutes=1)) == NotScorable.IN_PROGRESS


def test_it_explains_every_reason():
    assert set(REASON_TEXT) == set(NotScorable)
    assert all(text.strip() for text in REASON_TEXT.values())
    assert {r.value for r in NotScorable} == {
        "in_progress",
        "unresolved_parent",
        "cycle",
        "duplicate_id",
        "unknown_active_message",
        "empty",
        "tool_call_without_result",
        "truncated_by_source",
        "content_awaited",
        "too_long_for_judge",
        "outside_judge_sample",
    }


# --- rendering ----------------------------------------------------------------------------------------------


def test_it_renders_the_header_content_parts_and_tool_calls():
    m = msg(
        "a1",
        "u1",
        "assistant",
        [
            {"type": "text", "text": "Here is the chart."},
            {"type": "image_url", "image_url": {"url": "https://example.com/c.png"}},
            {"type": "text", "text": "And the numbers."},
        ],
        tool_calls=[tool_call("call_9", "plot", '{"series": [1, 2,3]}')],
        name="analyst",
    )

    rendered = render_message(m)

    assert rendered.splitlines()[0] == '[message id="a1" role="assistant" name="analyst"]'
    assert "Here is the chart.\n[image_url]\nAnd the numbers." in rendered
    assert 'tool call id="call_9" function="plot" arguments: {"series": [1, 2,3]}' in rendered


def test_it_renders_tool_results_with_their_call_id():
    rendered = render_message(msg("t1", "a1", "tool", "42", tool_call_id="c1", name="calc"))

    assert rendered == '[message id="t1" role="tool" name="calc" tool_call_id="c1"]\n42'


def test_it_quotes_ids_so_content_cannot_forge_a_header():
    rendered = render_message(msg('x"] [message id="y', None, "user", "hi"))

    assert rendered.splitlines()[0] == '[message id="x\\"] [message id=\\"y" role="user"]'


def test_it_never_truncates_a_rendered_message():
    content = "y" * 200_000 + "END"

    assert render_message(msg("u1", None, "user", content)).endswith(content)


def test_it_measures_size_as_the_rendering_plus_one_separator():
    messages = chain(("u1", "user", "hi"), ("a1", "assistant", "hello"))
    nonce = new_nonce()

    assert message_size(messages[0]) == len(render_message(messages[0], nonce=nonce)) + 2
    assert rendered_size(messages) == len(render_messages(messages, nonce=nonce)) + 2
    # In tokens too, whatever the nonce drawn: measured with the costliest one.
    assert rendered_size(messages, estimate_tokens) >= estimate_tokens(render_messages(messages, nonce=nonce))


# --- staging ------------------------------------------------------------------------------------------------


def conversation(turns: int, size: int = 300) -> list[EvidenceMessage]:
    specs = []
    for n in range(turns):
        specs.append((f"u{n}", "user", f"request {n} " + "q" * (size // 3)))
        specs.append((f"a{n}", "assistant", f"answer {n} " + "a" * size))
    return chain(*specs)


def assert_valid_stages(path: list[EvidenceMessage], result, budget: int) -> None:
    """Every message in exactly one stage, in order; each context is some of the user messages before its slice
    (the first and the latest), within a quarter of the budget; only a single-message stage may exceed the budget,
    exactly those are marked oversized, and they carry no context."""
    assert [m for stage in result for m in stage.messages] == path
    assert [stage.index for stage in result] == list(range(len(result)))
    sizes = {m.id: message_size(m) for m in path}
    earlier_requests: list[EvidenceMessage] = []
    for stage in result:
        assert stage.messages
        ids = [m.id for m in stage.context]
        earlier_ids = [m.id for m in earlier_requests]
        assert ids == [i for i in earlier_ids if i in set(ids)]  # a subsequence, in path order
        assert len(stage.context) + stage.context_omitted == len(earlier_requests)
        context_size = sum(sizes[i] for i in ids)
        size = context_size + sum(sizes[m.id] for m in stage.messages)
        assert stage.oversized == (size > budget)
        if stage.oversized:
            assert len(stage.messages) == 1 and stage.context == []
        else:
            assert context_size <= budget * CONTEXT_SHARE
        earlier_requests.extend(m for m in stage.messages if m.role == "user")


def test_it_makes_one_stage_when_the_path_fits():
    path = conversation(3)

    result = stages(path, budget=rendered_size(path))

    assert len(result) == 1
    assert result[0].messages == path
    assert result[0].context == []
    assert not result[0].oversized


def test_it_splits_a_long_path_into_stages_led_by_the_first_and_latest_requests():
    path = conversation(12)
    budget = rendered_size(path) // 2

    result = stages(path, budget=budget)

    assert len(result) > 2
    assert_valid_stages(path, result, budget)
    assert not any(stage.oversized for stage in result)
    assert result[0].context == []
    assert result[-1].context[0].id == "u0"
    last_request_before = [m for stage in result[:-1] for m in stage.messages if m.role == "user"][-1]
    assert result[-1].context[-1] == last_request_before


def test_it_gives_an_oversized_message_its_own_stage_uncut():
    path = conversation(4)
    huge = replace(path[3], content="z" * 50_000)
    path[3] = huge
    budget = 2_000

    result = stages(path, budget=budget)

    assert_valid_stages(path, result, budget)
    oversized = [stage for stage in result if stage.oversized]
    assert [stage.messages for stage in oversized] == [[huge]]
    assert oversized[0].messages[0].content == "z" * 50_000


def test_it_repeats_only_as_many_earlier_requests_as_a_quarter_of_the_budget_holds():
    path = conversation(10, size=600)
    budget = message_size(path[0]) * 12

    result = stages(path, budget=budget)

    assert_valid_stages(path, result, budget)
    assert result[-1].context[0].id == "u0"
    assert result[-1].context_omitted > 0
    assert not any(stage.oversized for stage in result)


def test_it_counts_in_the_units_it_is_given():
    path = conversation(6)
    tokens = rendered_size(path, estimate_tokens)

    assert len(stages(path, budget=tokens, measure=estimate_tokens)) == 1
    assert len(stages(path, budget=tokens // 2, measure=estimate_tokens)) > 1


def test_it_makes_no_stage_for_an_empty_path_and_rejects_a_useless_budget():
    assert stages([], budget=100) == []
    with pytest.raises(ValueError):
        stages(conversation(1), budget=0)


def test_it_estimates_digits_as_a_token_each_and_other_bytes_three_to_a_token():
    assert estimate_tokens("") == 0
    assert estimate_tokens("1234567890") == 10
    assert estimate_tokens("abcdef") == 2
    assert estimate_tokens("日本") == 2  # six bytes of UTF-8


def test_it_combines_stage_verdicts():
    per_stage = [
        {"grounded": "pass", "complete": "pass", "usable": "pass"},
        {"grounded": "fail", "complete": "unknown", "usable": "pass"},
        {"grounded": "pass", "complete": "pass"},
    ]

    assert combine_stage_verdicts(per_stage) == {
        "grounded": "fail",
        "complete": "unknown",
        "usable": "unknown",
    }
    assert combine_stage_verdicts([{"grounded": "pass"}, {"grounded": "pass"}]) == {"grounded": "pass"}
    assert combine_stage_verdicts([{"grounded": "unknown"}, {"grounded": "fail"}]) == {"grounded": "fail"}
    assert combine_stage_verdicts([]) == {}


# --- properties over random trees ---------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    message_trees(),
    st.booleans(),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=2)),
)
def test_it_returns_a_path_or_a_named_reason_for_any_tree(tree, closed, age):
    messages, active = tree

    result = active_path(messages, active)
    why = reason(result.path, closed=closed, last_activity=NOW - age, path_problem=result.problem)

    assert why is None or why in set(NotScorable)
    if result.problem is not None:
        assert why == result.problem
        return
    path = result.path
    assert path
    assert path[0].parent_id is None
    assert all(child.parent_id == parent.id for parent, child in zip(path, path[1:], strict=False))
    assert len({m.id for m in path}) == len(path)
    if active is not None:
        assert path[-1].id == active
    else:
        assert branch_count(messages) >= 1
    assert abandoned_message_ids(messages, path) == {m.id for m in messages} - {m.id for m in path}


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(message_trees())
def test_it_fingerprints_deterministically(tree):
    messages, active = tree
    path = active_path(messages, active).path
    rebuilt = [EvidenceMessage(**json.loads(json.dumps(canonical_message(m))), parent_id="other") for m in path]

    assert fingerprint(path) == fingerprint(path) == fingerprint(rebuilt)
    assert fingerprint(path).startswith("fp1:")
    assert len(fingerprint(path)) == len("fp1:") + 64


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(message_trees())
def test_it_fingerprints_each_prefix_of_the_path_as_the_path_ending_there(tree):
    messages, active = tree
    path = active_path(messages, active).path

    assert prefix_fingerprints(path) == [fingerprint(path[: n + 1]) for n in range(len(path))]


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(message_trees(), st.integers(1, 3_000))
def test_it_stages_every_path_message_exactly_once_in_order(tree, budget):
    messages, active = tree
    path = active_path(messages, active).path

    result = stages(path, budget=budget)

    assert_valid_stages(path, result, budget)
    if path and rendered_size(path) <= budget:
        assert len(result) == 1
    # Bounded context: a stage ends only when the next message would not fit beside at most a quarter of the
    # budget of context, so two consecutive stages always hold more than three quarters of it.
    normal = [stage for stage in result if not stage.oversized]
    assert len(normal) <= 2 * rendered_size(path) / (budget * (1 - CONTEXT_SHARE)) + 1

"""Evidence messages for property tests: tool calls, and random message trees (orphans, cycles, self-parents,
duplicates, undated messages, random roles and tool calls, deep chains) drawn by hypothesis."""

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from grading.core.evidence import EvidenceMessage

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)  # random messages are dated within seconds of it


def tool_call(call_id: str, name: str = "lookup", arguments: str = '{"q": "x"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CALL_IDS = ["c1", "c2", "c3"]
image_urls = st.fixed_dictionaries({"url": st.text(max_size=10)})
content_parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": image_urls}),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2),
)
tool_calls_strategy = st.none() | st.lists(
    st.one_of(
        st.builds(tool_call, st.sampled_from(CALL_IDS), st.text(max_size=8), st.text(max_size=20)),
        st.fixed_dictionaries({"type": st.just("function")}),
        st.integers(),
    ),
    max_size=3,
)


def random_message(rng: random.Random, id: str, parent: str | None) -> EvidenceMessage:
    """A cheap random message for deep chains: a hypothesis draw per field would dominate the run time."""
    role = rng.choice(["system", "user", "assistant", "tool"])
    calls = None
    if role == "assistant" and rng.random() < 0.3:
        calls = [tool_call(rng.choice(CALL_IDS)) for _ in range(rng.randint(0, 2))]
    return EvidenceMessage(
        id=id,
        parent_id=parent,
        role=role,
        content=rng.choice([None, "text " * rng.randint(0, 30), [{"type": "text", "text": "part"}]]),
        tool_calls=calls,
        tool_call_id=rng.choice(CALL_IDS) if role == "tool" else None,
        created_at=rng.choice([None, T0 + timedelta(seconds=rng.randint(0, 5))]),
        truncated=rng.random() < 0.002,
    )


# The strategies of a random forest's messages, built once: a strategy built inside `message_trees` is built and
# validated again at every draw of every message, which cost more than drawing from it.
forest_ids = st.lists(st.sampled_from([f"m{n}" for n in range(30)]), max_size=25, unique=True)
roles = st.sampled_from(["system", "user", "assistant", "tool"])
contents = st.none() | st.text(max_size=40) | st.lists(content_parts, max_size=3)
tool_call_ids = st.none() | st.sampled_from(CALL_IDS)
names = st.none() | st.text(max_size=5)
dates = st.none() | st.integers(0, 5).map(lambda s: T0 + timedelta(seconds=s))


@st.composite
def message_trees(draw) -> tuple[list[EvidenceMessage], str | None]:
    """Random forests (orphans, cycles, self-parents, duplicates, undated messages, random roles and tool
    calls), or a deep chain with one of those defects."""
    if draw(st.booleans()):
        ids = draw(forest_ids)
        parent_ids = st.none() | st.sampled_from([*ids, "ghost"])
        parents = [draw(parent_ids) for _ in ids]
        messages = [
            EvidenceMessage(
                id=id,
                parent_id=parent,
                role=draw(roles),
                content=draw(contents),
                tool_calls=draw(tool_calls_strategy),
                tool_call_id=draw(tool_call_ids),
                name=draw(names),
                created_at=draw(dates),
                hidden=draw(st.booleans()),
                truncated=draw(st.integers(0, 20)) == 0,
            )
            for id, parent in zip(ids, parents, strict=True)
        ]
    else:
        depth = draw(st.integers(1, 400))
        ids = [f"d{n}" for n in range(depth)]
        parents: list[str | None] = [None, *ids[:-1]]
        defect = draw(st.sampled_from(["none", "none", "cycle", "orphan"]))
        if defect == "cycle":
            parents[0] = ids[draw(st.integers(0, depth - 1))]
        elif defect == "orphan":
            parents[draw(st.integers(0, depth - 1))] = "ghost"
        # One drawn seed, not hypothesis's own random (`st.randoms()`), each of whose calls is a draw of its own: a
        # deep chain's thousands of them were most of the time of every test that draws these trees.
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        messages = [random_message(rng, id, parent) for id, parent in zip(ids, parents, strict=True)]
    if messages and draw(st.integers(0, 9)) == 0:
        messages.append(replace(draw(st.sampled_from(messages)), content="twin"))
    active = draw(st.none() | st.sampled_from([*ids, "missing"]))
    return messages, active

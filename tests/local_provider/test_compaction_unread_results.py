"""Native compaction in a tool loop, through the real SDKs: what a compaction keeps of tool results
no reply has read yet, and where an inline compaction may stand beside a reply's calls.

The environment's actions are offered as tools (the harness's tools mode), so the next frame arrives
as the action call's result. A client that compacts before the model has answered that result
(compaction_call rule 1: the unread turn is compacted with the rest) needs the compaction to carry
it: the frame below is a level the model has never seen, and the only place that holds it is the
result. An inline compaction, on the other hand, never stands after a reply's calls: a client that
keeps "the latest compaction item and everything after it" would send the calls' outputs without
their calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from turnstate.local_provider.server import LocalProvider

from . import test_messages as messages_wire
from . import test_responses as responses_wire
from .action_tools import game_tools, messages_tool, responses_tool
from .test_policy import DETOUR_ROWS, frame_text

FIRST = responses_wire.SHOWN  # level 1, beacon C: the model answers ACTION2
UNSEEN = frame_text(DETOUR_ROWS, beacon="B", level=2)  # a new level: the way to its door B starts upward
UNSEEN_ACTION = "ACTION1"
NO_FRAME = "I see no game frame"
RESPONSES_TOOLS = game_tools(responses_tool)
MESSAGES_TOOLS = game_tools(messages_tool)

Item = dict[str, Any]


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


@pytest.fixture
def openai_client(provider: LocalProvider) -> Iterator[openai.OpenAI]:
    with responses_wire.client_for(provider) as client:
        yield client


@pytest.fixture
def anthropic_client(provider: LocalProvider) -> Iterator[anthropic.Anthropic]:
    with messages_wire.client_for(provider) as client:
        yield client


# --- OpenAI Responses (and xAI): /responses/compact ------------------------------------------------


def act(client: openai.OpenAI, items: list[Item], **params: Any) -> Any:
    return responses_wire.ask(client, items, tools=RESPONSES_TOOLS, **params)


def a_tool_loop_answered_by(client: openai.OpenAI, result: str) -> list[Item]:
    """The first frame, the model's action call, and the call's result, which no reply has read."""
    reply = responses_wire.replayable(act(client, [responses_wire.user(FIRST)]))
    (call,) = [item for item in reply if item["type"] == "function_call"]
    assert call["name"] == "ACTION2"
    return [
        responses_wire.user(FIRST),
        *reply,
        {"type": "function_call_output", "call_id": call["call_id"], "output": result},
    ]


def calls_of(response: Any) -> list[str]:
    return [item.name for item in response.output if item.type == "function_call"]


def test_a_compacted_tool_loop_carries_the_unread_result_and_the_model_acts_on_it(openai_client: openai.OpenAI) -> None:
    history = a_tool_loop_answered_by(openai_client, UNSEEN)
    compacted = openai_client.responses.compact(model=responses_wire.MODEL, input=history)
    window = responses_wire.replayable_compaction(compacted.output)
    assert [item["type"] for item in window] == ["message", "compaction"]  # the result is not kept verbatim

    response = act(openai_client, window)

    assert NO_FRAME not in response.output_text
    assert calls_of(response) == [UNSEEN_ACTION]


def test_once_the_model_wrote_after_a_compacted_window_the_result_it_carried_is_not_read_again(
    openai_client: openai.OpenAI,
) -> None:
    """Once the model wrote after the compaction, the result it carried was read: the next turn is
    what follows, not the old frame again."""
    history = a_tool_loop_answered_by(openai_client, UNSEEN)
    window = responses_wire.replayable_compaction(
        openai_client.responses.compact(model=responses_wire.MODEL, input=history).output
    )
    first = responses_wire.replayable(act(openai_client, window))
    (call,) = [item for item in first if item["type"] == "function_call"]

    following = act(
        openai_client,
        [*window, *first, {"type": "function_call_output", "call_id": call["call_id"], "output": "nothing"}],
    )

    assert NO_FRAME in following.output_text


def test_a_compaction_bills_the_unread_result_it_carries_as_output(openai_client: openai.OpenAI) -> None:
    answered = a_tool_loop_answered_by(openai_client, "short")
    padded = a_tool_loop_answered_by(openai_client, UNSEEN)
    short = openai_client.responses.compact(model=responses_wire.MODEL, input=answered)
    long = openai_client.responses.compact(model=responses_wire.MODEL, input=padded)
    assert long.usage.output_tokens > short.usage.output_tokens


# --- OpenAI Responses: inline compaction (context_management) beside function calls ---------------

COMPACT_AT_ONCE = [{"type": "compaction", "compact_threshold": 16}]


def test_a_reply_that_calls_tools_is_not_compacted_inline_however_large_the_context(
    openai_client: openai.OpenAI,
) -> None:
    """Reported of the real service (openai/openai-python#3075): a turn whose output is only
    function calls gets no compaction item; the next turn that answers with a message does."""
    response = act(openai_client, [responses_wire.user(FIRST)], context_management=COMPACT_AT_ONCE)
    assert [item.type for item in response.output] == ["reasoning", "function_call"]

    answered = responses_wire.ask(openai_client, [responses_wire.user(FIRST)], context_management=COMPACT_AT_ONCE)
    assert [item.type for item in answered.output] == ["reasoning", "message", "compaction"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_keeping_the_latest_compaction_on_can_answer_the_calls_of_a_compacting_request(
    openai_client: openai.OpenAI, stream: bool
) -> None:
    """The harness's inline rule (keep the latest compaction item and everything after it) applied to
    a reply with calls: its outputs still find their calls, and the model acts on the result."""
    sent = [responses_wire.user(FIRST)]
    if stream:
        events = list(act(openai_client, sent, context_management=COMPACT_AT_ONCE, stream=True))
        response = next(event.response for event in events if event.type == "response.completed")
    else:
        response = act(openai_client, sent, context_management=COMPACT_AT_ONCE)
    history = responses_wire.from_latest_compaction([*sent, *responses_wire.replayable(response)])
    (call,) = [item for item in history if item.get("type") == "function_call"]

    following = act(
        openai_client,
        [*history, {"type": "function_call_output", "call_id": call["call_id"], "output": UNSEEN}],
        context_management=COMPACT_AT_ONCE,
    )

    assert calls_of(following) == [UNSEEN_ACTION]


# --- Anthropic Messages: on-demand compaction -------------------------------------------------------


def act_anthropic(client: anthropic.Anthropic, turns: list[Item]) -> Any:
    """An action request that replays a compaction block (so it names the compaction beta)."""
    return messages_wire.ask(
        client, turns, tools=MESSAGES_TOOLS, extra_headers={"anthropic-beta": messages_wire.COMPACT}
    )


def a_messages_tool_loop_answered_by(client: anthropic.Anthropic, result: str) -> list[Item]:
    """The first frame, the model's action call, and a user turn with the call's result."""
    reply = messages_wire.ask(client, [messages_wire.user(FIRST)], tools=MESSAGES_TOOLS)
    (use,) = [block for block in reply.content if block.type == "tool_use"]
    assert use.name == "ACTION2"
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": result}]}
    return [messages_wire.user(FIRST), messages_wire.replayed(reply), answer]


def uses_of(reply: Any) -> list[str]:
    return [block.name for block in reply.content if block.type == "tool_use"]


def test_a_compaction_request_that_ends_with_tool_results_is_answered_with_one_block(
    anthropic_client: anthropic.Anthropic,
) -> None:
    compacted = messages_wire.compact(anthropic_client, a_messages_tool_loop_answered_by(anthropic_client, UNSEEN))
    assert compacted.stop_reason == "compaction"
    assert [block.type for block in compacted.content] == ["compaction"]
    assert "LEVEL 2" not in compacted.model_dump_json()  # what it carries is sealed, not shown


def test_a_compacted_tool_loop_carries_the_unread_result_over_messages_and_the_model_acts_on_it(
    anthropic_client: anthropic.Anthropic,
) -> None:
    history = a_messages_tool_loop_answered_by(anthropic_client, UNSEEN)
    compacted = messages_wire.replayed(messages_wire.compact(anthropic_client, history))

    reply = act_anthropic(anthropic_client, [compacted])

    assert NO_FRAME not in messages_wire.text_of(reply)
    assert uses_of(reply) == [UNSEEN_ACTION]


def test_once_the_model_wrote_after_a_compaction_block_the_result_it_carried_is_not_read_again(
    anthropic_client: anthropic.Anthropic,
) -> None:
    history = a_messages_tool_loop_answered_by(anthropic_client, UNSEEN)
    compacted = messages_wire.replayed(messages_wire.compact(anthropic_client, history))
    reply = act_anthropic(anthropic_client, [compacted])
    (use,) = [block for block in reply.content if block.type == "tool_use"]
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "nothing"}]}

    following = act_anthropic(anthropic_client, [compacted, messages_wire.replayed(reply), answer])

    assert NO_FRAME in messages_wire.text_of(following)

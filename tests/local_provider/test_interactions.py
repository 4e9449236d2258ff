"""The embedded local provider's Gemini Interactions wire, through the real google-genai SDK over real HTTP.

The model is the real policy, so a level-1 frame that shows beacon C followed by a dark frame tells
whether the provider read the beacon back from the replayed thought step: the dark frame alone says
nothing of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, get_args, get_type_hints

import httpx2
import pytest
from google import genai
from google.genai import _interactions, types
from google.genai._gaos.types import interactions as sdk_types

from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens
from turnstate.local_provider import google_words
from turnstate.local_provider.exchange import MALFORMED_REPLY, SharedError
from turnstate.local_provider.faults import FAULT_KINDS, Fault
from turnstate.local_provider.interactions import THOUGHT_SUMMARY
from turnstate.local_provider.interactions_request import (
    CONTENT_KEYS,
    FUNCTION_KEYS,
    GENERATION_FIELDS,
    REQUEST_FIELDS,
    STEP_KEYS,
    TOOL_TYPES,
)
from turnstate.local_provider.server import INVALID_API_KEY, LocalProvider

from .test_policy import EXAMPLE_ROWS, frame_text

MODEL = "gemini-3-pro-preview"
SYSTEM = "You play beacon_grid. Answer with one line ACTION: <action>."
SUMMARIES = {"thinking_summaries": "auto"}
SHOWN = frame_text(EXAMPLE_ROWS, beacon="C")
DARK = frame_text(EXAMPLE_ROWS, beacon="dark")
REMEMBERED = "heading for door C (beacon seen)"
FORGOTTEN = "heading for door A (beacon unknown, guessing)"
THOUGHT = "NOTES: level 1 beacon C"

Step = dict[str, Any]
Interaction = sdk_types.Interaction


def user(text: str) -> Step:
    return {"type": "user_input", "content": [{"type": "text", "text": text}]}


def client_for(provider: LocalProvider, api_version: str = "v1beta", api_key: str = "test-key") -> genai.Client:
    """A client that tries once: the harness owns retries."""
    options = types.HttpOptions(
        base_url=provider.base_url, api_version=api_version, retry_options=types.HttpRetryOptions(attempts=1)
    )
    return genai.Client(api_key=api_key, http_options=options)


def ask(client: genai.Client, steps: Sequence[Step], **params: Any) -> Interaction:
    settings: dict[str, Any] = {"system_instruction": SYSTEM, "store": False, "generation_config": SUMMARIES, **params}
    return client.interactions.create(model=MODEL, input=list(steps), **settings)


def replayed(reply: Interaction) -> list[Step]:
    """The reply's steps as the next request's input: every step, serialized as received."""
    return [step.model_dump(mode="json", exclude_unset=True) for step in reply.steps or []]


def first_turn(client: genai.Client, **params: Any) -> tuple[list[Step], Interaction]:
    """The beacon frame answered; the conversation so far, replayed faithfully."""
    reply = ask(client, [user(SHOWN)], **params)
    return [user(SHOWN), *replayed(reply)], reply


def text_of(reply: Interaction) -> str:
    return "".join(
        getattr(part, "text", "")
        for step in reply.steps or []
        if step.type == "model_output"
        for part in step.content or []
    )


def google_error(raised: pytest.ExceptionInfo[_interactions.APIStatusError], status: str = "INVALID_ARGUMENT") -> str:
    """The message of a Google error body, after checking its shape."""
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["error"]["code"] == raised.value.status_code and body["error"]["status"] == status
    return str(body["error"]["message"])


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with LocalProvider() as running:
        yield running


@pytest.fixture
def client(provider: LocalProvider) -> Iterator[genai.Client]:
    with client_for(provider) as sdk_client:
        yield sdk_client


# --- thinking and its replay -----------------------------------------------------------------------


@pytest.mark.parametrize("api_version", ["v1beta", "v1"])
def test_a_first_turn_is_a_signed_thought_step_then_the_action(provider: LocalProvider, api_version: str) -> None:
    with client_for(provider, api_version) as client:
        reply = ask(client, [user(SHOWN)])
    assert reply.status == "completed" and reply.id and reply.model == MODEL
    assert [step.type for step in reply.steps or []] == ["thought", "model_output"]
    thought = replayed(reply)[0]
    assert thought["signature"] and thought["summary"] == [{"type": "text", "text": THOUGHT_SUMMARY}]
    assert "ACTION: " in text_of(reply) and REMEMBERED in text_of(reply)
    assert reply.output_text == text_of(reply)


def test_only_the_two_api_versions_are_served(provider: LocalProvider) -> None:
    body = {"model": MODEL, "input": SHOWN}
    for version, status in (("v1beta", 200), ("v1", 200), ("v1alpha", 404)):
        response = httpx2.post(f"{provider.base_url}/{version}/interactions", json=body, headers=_raw_headers())
        assert response.status_code == status


def test_the_thought_is_in_no_readable_part_of_the_reply_nor_in_its_signature(client: genai.Client) -> None:
    reply = ask(client, [user(SHOWN)])
    assert THOUGHT not in reply.model_dump_json()
    decoded = base64.urlsafe_b64decode(replayed(reply)[0]["signature"].encode("ascii"))
    assert b"NOTES" not in decoded and b"beacon" not in decoded


def test_without_summaries_the_thought_step_has_only_its_signature_and_still_carries_the_thought(
    client: genai.Client,
) -> None:
    history, reply = first_turn(client, generation_config={"thinking_summaries": "none"})
    assert set(replayed(reply)[0]) == {"type", "signature"}
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)], generation_config={}))


def test_a_faithful_replay_is_accepted_and_the_beacon_is_remembered(client: genai.Client) -> None:
    history, _ = first_turn(client)
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)]))


def test_a_replay_may_start_at_a_later_whole_turn_and_loses_what_it_dropped(client: genai.Client) -> None:
    """Only the turn that saw the beacon noted it; dropping that turn is allowed and forgets it."""
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK), *second, user(DARK)]))
    assert FORGOTTEN in text_of(ask(client, [user(DARK), *second, user(DARK)]))


def test_earlier_user_inputs_are_read_for_notes_but_not_for_old_frames(client: genai.Client) -> None:
    """A harness may hand the model a summary as an earlier user input: its NOTES lines are read; an old
    frame's beacon line is not (the beacon survives only in the thought of the turn that saw it)."""
    answer = replayed(ask(client, [user(DARK)]))
    assert FORGOTTEN in text_of(ask(client, [user(DARK), *answer, user(DARK)]))
    assert REMEMBERED in text_of(ask(client, [user(f"{THOUGHT}\n{DARK}"), *answer, user(DARK)]))
    assert FORGOTTEN in text_of(ask(client, [user(SHOWN), *answer, user(DARK)]))


def _with_thought(history: list[Step], **changes: Any) -> list[Step]:
    return [history[0], {**history[1], **changes}, history[2]]


def _altered_signature(history: list[Step]) -> list[Step]:
    signature = history[1]["signature"]
    return _with_thought(
        history, signature=("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    )


def _without_signature(history: list[Step]) -> list[Step]:
    return [history[0], {"type": "thought", "summary": history[1]["summary"]}, history[2]]


def _text_edited(history: list[Step]) -> list[Step]:
    output = history[2]
    return [history[0], history[1], {**output, "content": [{"type": "text", "text": "ACTION: ACTION1"}]}]


UNFAITHFUL: list[tuple[str, Callable[[list[Step]], list[Step]], str]] = [
    ("altered signature", _altered_signature, "input[1].signature: Thought signature is not valid."),
    ("altered summary", lambda history: _with_thought(history, summary=[]), "input[1].signature: Thought signature"),
    ("missing signature", _without_signature, "input[1].signature: a thought step must be replayed with"),
    ("thought after the output", lambda history: [history[0], history[2], history[1]], "input[2]: a thought step must"),
    ("output dropped", lambda history: history[:2], "input[1]: a thought step must be followed right away"),
    ("output text edited", _text_edited, "is not valid for input[2]"),
]


@pytest.mark.parametrize(("case", "unfaithful", "words"), UNFAITHFUL, ids=[case[0] for case in UNFAITHFUL])
def test_an_unfaithful_replay_of_a_thought_is_a_400_naming_its_step(
    client: genai.Client, case: str, unfaithful: Callable[[list[Step]], list[Step]], words: str
) -> None:
    history, _ = first_turn(client)
    assert REMEMBERED in text_of(ask(client, [*history, user(DARK)]))  # the faithful control
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [*unfaithful(history), user(DARK)])
    assert words in google_error(raised)


def test_a_model_output_without_its_thought_is_taken_and_the_model_reads_no_thought_for_it(
    client: genai.Client,
) -> None:
    """Gemini validates signatures strictly only for the current turn's function calls: a text whose
    thought was dropped, or that another model wrote, is taken (interactions_conversation.py rule 3)."""
    history, _ = first_turn(client)
    assert FORGOTTEN in text_of(ask(client, [history[0], history[2], user(DARK)]))
    written_elsewhere = {"type": "model_output", "content": [{"type": "text", "text": "Beacon C, noted."}]}
    assert FORGOTTEN in text_of(ask(client, [user(SHOWN), written_elsewhere, user(DARK)]))


@pytest.mark.parametrize("stream", [False, True])
def test_a_replay_rule_is_checked_before_anything_is_streamed_or_billed(provider: LocalProvider, stream: bool) -> None:
    with client_for(provider) as client:
        history, _ = first_turn(client)
        with pytest.raises(_interactions.BadRequestError):
            ask(client, [*history[:2], user(DARK)], stream=stream)


def test_thought_steps_swapped_between_turns_are_a_400(client: genai.Client) -> None:
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    # The two turns' outputs are the same text, so each thought matches its new output: the chain catches it.
    assert second[1] == history[2]
    swapped = [user(SHOWN), second[0], history[2], user(DARK), history[1], second[1], user(DARK)]
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, swapped)
    assert "input[4]: this thought step was produced in another place" in google_error(raised)


def test_whole_turns_reordered_are_a_400(client: genai.Client) -> None:
    history, _ = first_turn(client)
    second = replayed(ask(client, [*history, user(DARK)]))
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(DARK), *second, user(SHOWN), *history[1:], user(DARK)])
    assert "input[4]: this thought step was produced in another place" in google_error(raised)


def test_another_providers_thought_cannot_be_replayed(client: genai.Client) -> None:
    with LocalProvider() as other, client_for(other) as other_client:
        history, _ = first_turn(other_client)
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [*history, user(DARK)])
    assert "input[1].signature: Thought signature is not valid." in google_error(raised)


# --- streaming -------------------------------------------------------------------------------------


def stream(client: genai.Client, steps: Sequence[Step], **params: Any) -> list[Any]:
    return list(ask(client, steps, stream=True, **params))


def accumulated(events: Sequence[Any]) -> list[Step]:
    """The steps a client rebuilds from a stream: each step's start, with its deltas folded in."""
    steps: dict[int, Step] = {}
    arguments: dict[int, str] = {}  # a function call's arguments, as JSON text pieces
    for event in events:
        if event.event_type == "step.start":
            steps[event.index] = event.step.model_dump(mode="json", exclude_unset=True)
        elif event.event_type == "step.delta":
            step, delta = steps[event.index], event.delta
            if delta.type == "thought_signature":
                step["signature"] = delta.signature
            elif delta.type == "thought_summary":
                step.setdefault("summary", []).append(delta.content.model_dump(mode="json", exclude_unset=True))
            elif delta.type == "arguments_delta":
                arguments[event.index] = arguments.get(event.index, "") + delta.arguments
            else:  # text pieces, joined into one text content
                content = step.setdefault("content", [{"type": "text", "text": ""}])
                content[-1]["text"] += delta.text
    for index, text in arguments.items():
        steps[index]["arguments"] = json.loads(text)
    return [steps[index] for index in sorted(steps)]


def test_a_stream_sends_its_events_in_the_documented_order(client: genai.Client) -> None:
    events = stream(client, [user(SHOWN)])
    kinds = [(event.event_type, getattr(getattr(event, "delta", None), "type", None)) for event in events]
    assert kinds[:6] == [
        ("interaction.created", None),
        ("interaction.status_update", None),
        ("step.start", None),
        ("step.delta", "thought_summary"),
        ("step.delta", "thought_signature"),
        ("step.stop", None),
    ]
    assert kinds[6] == ("step.start", None) and kinds[-2:] == [("step.stop", None), ("interaction.completed", None)]
    texts = kinds[7:-2]
    assert texts == [("step.delta", "text")] * len(texts) and len(texts) > 1
    assert events[0].interaction.status == "in_progress" and events[1].status == "in_progress"
    assert [events[2].step.type, events[6].step.type] == ["thought", "model_output"]
    final = events[-1].interaction
    assert final.status == "completed" and final.id == events[0].interaction.id and final.usage.total_output_tokens > 0


def test_a_streamed_reply_accumulates_to_a_replayable_interaction(client: genai.Client) -> None:
    steps = accumulated(stream(client, [user(SHOWN)]))
    assert [step["type"] for step in steps] == ["thought", "model_output"]
    assert REMEMBERED in "".join(part["text"] for part in steps[1]["content"])
    assert REMEMBERED in text_of(ask(client, [user(SHOWN), *steps, user(DARK)]))


def test_a_stream_is_data_lines_of_json_named_by_event_type(provider: LocalProvider) -> None:
    body = {"model": MODEL, "input": SHOWN, "store": False, "stream": True}
    response = httpx2.post(f"{provider.base_url}/v1beta/interactions", json=body, headers=_raw_headers())
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in response.text.splitlines() if line]
    assert all(line.startswith("data: {") for line in lines)
    names = [json.loads(line.removeprefix("data: "))["event_type"] for line in lines]
    assert names[0] == "interaction.created" and names[-1] == "interaction.completed"


def test_a_streamed_safety_stop_names_its_error_in_the_output_step_start() -> None:
    with _faulted("refusal") as provider, client_for(provider) as client:
        events = stream(client, [user(SHOWN)])
    start = [event.step for event in events if event.event_type == "step.start"][-1]
    assert start.type == "model_output" and start.error.details[0]["reason"] == "SAFETY"
    assert [event for event in events if getattr(getattr(event, "delta", None), "type", None) == "text"] == []
    assert events[-1].interaction.status == "incomplete"


# --- usage -----------------------------------------------------------------------------------------


def _tokens(*texts: str) -> int:
    return sum(MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text) for text in texts)


def test_usage_counts_the_prompt_the_output_and_the_thought_apart(client: genai.Client) -> None:
    reply = ask(client, [user(SHOWN)])
    usage = reply.usage
    assert usage is not None
    assert usage.total_input_tokens == _tokens(SYSTEM, SHOWN) and usage.total_cached_tokens == 0
    assert usage.total_output_tokens == estimate_text_tokens(text_of(reply))
    assert usage.total_thought_tokens == estimate_text_tokens(THOUGHT)
    assert usage.total_tokens == usage.total_input_tokens + usage.total_output_tokens + usage.total_thought_tokens


def test_a_replayed_thought_is_billed_by_its_summary_and_signature(client: genai.Client) -> None:
    history, _ = first_turn(client)
    usage = ask(client, [*history, user(DARK)]).usage
    thought, output = history[1], history[2]
    summary_and_signature = THOUGHT_SUMMARY + thought["signature"]
    expected = _tokens(SYSTEM, SHOWN, summary_and_signature, output["content"][0]["text"], DARK)
    assert usage is not None and usage.total_input_tokens == expected


USAGE_FIELDS = ("total_input_tokens", "total_cached_tokens", "total_output_tokens", "total_thought_tokens")


def test_streamed_usage_is_the_non_streamed_usage(client: genai.Client) -> None:
    plain = ask(client, [user(SHOWN)]).usage
    streamed = stream(client, [user(SHOWN)])[-1].interaction.usage
    for name in (*USAGE_FIELDS, "total_tokens"):
        assert getattr(streamed, name) == getattr(plain, name), name


def test_max_output_tokens_bounds_thought_and_output_together(client: genai.Client) -> None:
    budget = estimate_text_tokens(THOUGHT) + 3
    reply = ask(client, [user(SHOWN)], generation_config={"max_output_tokens": budget})
    assert reply.status == "incomplete" and "ACTION: " not in text_of(reply)
    assert reply.usage is not None and reply.usage.total_output_tokens <= 3


LONG_SYSTEM = SYSTEM + " Remember the rules." * 900  # about 4,300 tokens


def test_implicit_caching_reports_a_repeated_prefix_from_4096_tokens_on(client: genai.Client) -> None:
    history, first = first_turn(client, system_instruction=LONG_SYSTEM)
    assert first.usage is not None and first.usage.total_cached_tokens == 0
    second = ask(client, [*history, user(DARK)], system_instruction=LONG_SYSTEM).usage
    assert second is not None and second.total_cached_tokens == first.usage.total_input_tokens
    assert second.total_cached_tokens >= 4096


def test_a_prefix_under_the_minimum_is_never_reported_as_cached(client: genai.Client) -> None:
    for _ in range(2):
        usage = ask(client, [user(SHOWN)]).usage
        assert usage is not None and usage.total_cached_tokens == 0


# --- validation, window, auth ----------------------------------------------------------------------


def _raw_headers(**extra: str) -> dict[str, str]:
    return {"x-goog-api-key": "test-key", **extra}


VALID: dict[str, Any] = {"model": MODEL, "input": SHOWN, "store": False}
SIGNED = {"type": "thought", "signature": "x"}
CALL = {"type": "function_call", "id": "c", "name": "f", "arguments": {}}
RESULT = {"type": "function_result", "call_id": "c", "result": "ok"}
INVALID: list[tuple[dict[str, Any], str]] = [
    ({"input": SHOWN}, "Field 'model' is required."),
    ({"model": MODEL}, "Field 'input' is required."),
    ({**VALID, "temperature": 0.5}, 'Invalid JSON payload received. Unknown name "temperature": Cannot find field.'),
    ({**VALID, "agent": "deep-research"}, "Invalid value at 'agent'"),
    ({**VALID, "background": True}, "Invalid value at 'background'"),
    ({**VALID, "store": "no"}, "Invalid value at 'store' (TYPE_BOOL)"),
    ({**VALID, "stream": 1}, "Invalid value at 'stream' (TYPE_BOOL)"),
    ({**VALID, "previous_interaction_id": "v1_abc"}, "Invalid value at 'previous_interaction_id'"),
    ({**VALID, "continuation_token": "abc"}, "Invalid value at 'continuation_token'"),
    ({**VALID, "system_instruction": 5}, "Invalid value at 'system_instruction' (TYPE_STRING), 5"),
    ({**VALID, "input": ""}, "Invalid value at 'input'"),
    ({**VALID, "input": [{"type": "function_response", "name": "f"}]}, "Invalid value at 'input[0].type'"),
    ({**VALID, "input": [{"type": "function_call", "name": "f", "arguments": {}}]}, "Field 'input[0].id' is required."),
    ({**VALID, "input": [{**CALL, "arguments": "{}"}]}, "Invalid value at 'input[0].arguments' (TYPE_MESSAGE)"),
    ({**VALID, "input": [{**CALL, "signature": "x"}]}, "Unknown name \"signature\" at 'input[0]'"),
    ({**VALID, "input": [{"type": "function_result", "call_id": "c"}]}, "Field 'input[0].result' is required."),
    ({**VALID, "input": [{**RESULT, "result": 5}]}, "Invalid value at 'input[0].result'"),
    ({**VALID, "input": [{**RESULT, "result": [{"type": "gif"}]}]}, "'input[0].result[0].type'"),
    ({**VALID, "input": [{**RESULT, "is_error": "no"}]}, "Invalid value at 'input[0].is_error' (TYPE_BOOL)"),
    ({**VALID, "tools": {"type": "function"}}, "Invalid value at 'tools'"),
    ({**VALID, "tools": [{"name": "f"}]}, "Field 'tools[0].type' is required."),
    ({**VALID, "tools": [{"type": "bash"}]}, "Invalid value at 'tools[0].type'"),
    ({**VALID, "tools": [{"type": "function", "name": "f", "strict": True}]}, "Unknown name \"strict\" at 'tools[0]'"),
    ({**VALID, "tools": [{"type": "function", "name": 5}]}, "Invalid value at 'tools[0].name' (TYPE_STRING)"),
    ({**VALID, "input": [user("a"), {**SIGNED, "extra": 1}]}, "Unknown name \"extra\" at 'input[1]'"),
    ({**VALID, "input": [{"type": "user_input", "content": [{"type": "text"}]}]}, "'input[0].content[0].text'"),
    ({**VALID, "input": [{"type": "user_input", "content": [{"type": "gif"}]}]}, "'input[0].content[0].type'"),
    ({**VALID, "input": [{"content": []}]}, "Field 'input[0].type' is required."),
    ({**VALID, "generation_config": {"candidate_count": 2}}, "Unknown name \"candidate_count\" at 'generation_config'"),
    ({**VALID, "generation_config": {"max_output_tokens": 0}}, "'generation_config.max_output_tokens' (must be"),
    ({**VALID, "generation_config": {"max_output_tokens": "9"}}, "'generation_config.max_output_tokens' (TYPE_INT32)"),
    ({**VALID, "generation_config": {"temperature": 3}}, "Invalid value at 'generation_config.temperature'"),
    (
        {**VALID, "generation_config": {"thinking_summaries": "all"}},
        "'generation_config.thinking_summaries' (TYPE_ENUM",
    ),
    ({**VALID, "generation_config": {"thinking_level": "deep"}}, "'generation_config.thinking_level' (TYPE_ENUM"),
    ({**VALID, "generation_config": {"stop_sequences": "x"}}, "'generation_config.stop_sequences'"),
]


@pytest.mark.parametrize(("body", "words"), INVALID, ids=[words for _, words in INVALID])
def test_an_invalid_request_is_a_400_naming_its_field(
    provider: LocalProvider, body: dict[str, Any], words: str
) -> None:
    url = f"{provider.base_url}/v1beta/interactions"
    assert httpx2.post(url, json=VALID, headers=_raw_headers()).status_code == 200
    response = httpx2.post(url, json=body, headers=_raw_headers())
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert words in error["message"]


VALID_INPUTS: list[tuple[str, object]] = [
    ("a string", SHOWN),
    ("one content", {"type": "text", "text": SHOWN}),
    ("a list of contents", [{"type": "text", "text": "Here is the frame."}, {"type": "text", "text": SHOWN}]),
    ("a list of steps", [user(SHOWN)]),
]


@pytest.mark.parametrize(("case", "given"), VALID_INPUTS, ids=[case for case, _ in VALID_INPUTS])
def test_input_is_one_user_turn_in_any_of_the_sdks_shapes(client: genai.Client, case: str, given: object) -> None:
    reply = client.interactions.create(model=MODEL, input=given, store=False)  # type: ignore[arg-type]
    assert REMEMBERED in text_of(reply)


def test_the_sdk_raises_a_bad_request_error_with_googles_body(client: genai.Client) -> None:
    with pytest.raises(_interactions.BadRequestError) as raised:
        ask(client, [user(SHOWN)], generation_config={"max_output_tokens": 0})
    assert raised.value.status_code == 400
    assert "generation_config.max_output_tokens" in google_error(raised)


def test_an_unknown_previous_interaction_is_a_404_not_found(client: genai.Client) -> None:
    with pytest.raises(_interactions.NotFoundError) as raised:
        client.interactions.create(model=MODEL, input=DARK, previous_interaction_id="v1_abc")
    assert google_error(raised, "NOT_FOUND") == "Interaction 'v1_abc' was not found."


def test_the_request_fields_are_the_installed_sdks() -> None:
    model, agent = sdk_types.CreateModelInteractionParam, sdk_types.CreateAgentInteractionParam
    assert REQUEST_FIELDS == set(model.__annotations__) | set(agent.__annotations__)
    assert GENERATION_FIELDS == set(sdk_types.GenerationConfigParam.__annotations__)
    step_params = {
        "user_input": sdk_types.UserInputStepParam,
        "thought": sdk_types.ThoughtStepParam,
        "model_output": sdk_types.ModelOutputStepParam,
        "function_call": sdk_types.FunctionCallStepParam,
        "function_result": sdk_types.FunctionResultStepParam,
    }
    assert {kind: set(param.__annotations__) for kind, param in step_params.items()} == STEP_KEYS
    tool_params = get_args(sdk_types.ToolParam.__value__)
    assert {get_args(get_type_hints(param)["type"])[0] for param in tool_params} == TOOL_TYPES
    assert set(sdk_types.FunctionParam.__annotations__) == FUNCTION_KEYS
    content_params = {
        "text": sdk_types.TextContentParam,
        "image": sdk_types.ImageContentParam,
        "document": sdk_types.DocumentContentParam,
        "audio": sdk_types.AudioContentParam,
        "video": sdk_types.VideoContentParam,
    }
    assert {kind: set(param.__annotations__) for kind, param in content_params.items()} == CONTENT_KEYS


def test_a_prompt_over_the_window_is_a_400_input_too_long() -> None:
    with LocalProvider(context_window=200) as provider, client_for(provider) as client:
        with pytest.raises(_interactions.BadRequestError) as raised:
            ask(client, [user(SHOWN + " x" * 400)])
        message = google_error(raised)
        assert message.startswith("The input token count (")
        assert message.endswith(") exceeds the maximum number of tokens allowed (200).")
        with pytest.raises(_interactions.BadRequestError) as raised:
            ask(client, [user("hi")], generation_config={"max_output_tokens": 500})
        assert "plus max_output_tokens (500) exceeds the maximum number of tokens allowed (200)." in google_error(
            raised
        )


def test_an_invalid_key_is_googles_400_api_key_invalid_and_not_admitted(provider: LocalProvider) -> None:
    with client_for(provider, api_key=INVALID_API_KEY) as bad:
        with pytest.raises(_interactions.BadRequestError) as raised:
            ask(bad, [user(SHOWN)])
    assert google_error(raised) == "API key not valid. Please pass a valid API key."
    assert raised.value.body["error"]["details"][0]["reason"] == "API_KEY_INVALID"  # type: ignore[index]
    missing = httpx2.post(f"{provider.base_url}/v1beta/interactions", json=VALID)
    assert missing.status_code == 403 and missing.json()["error"]["status"] == "PERMISSION_DENIED"
    assert provider.request_log == []


def test_every_shared_error_is_worded_in_googles_shape() -> None:
    for kind in get_args(SharedError):
        status, body = google_words.error_reply(kind, "text/plain")
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == status and error["message"]
        assert error["status"] == google_words.STATUS_NAMES[status]


# --- faults ----------------------------------------------------------------------------------------


def _faulted(kind: str) -> LocalProvider:
    return LocalProvider(faults=[Fault(at=1, kind=kind)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "error", "status", "words"),
    [
        ("rate_limit", _interactions.RateLimitError, 429, "RESOURCE_EXHAUSTED"),
        ("server_error", _interactions.InternalServerError, 500, "INTERNAL"),
        ("overloaded", _interactions.InternalServerError, 503, "UNAVAILABLE"),
    ],
)
def test_a_status_fault_fails_only_its_request(
    kind: str, error: type[_interactions.APIStatusError], status: int, words: str
) -> None:
    with _faulted(kind) as provider, client_for(provider) as client:
        with pytest.raises(error) as raised:
            ask(client, [user(SHOWN)])
        assert raised.value.status_code == status
        assert google_error(raised, words)
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


def _safety_stop(reply: Interaction) -> bool:
    output = (reply.steps or [])[-1]
    return (
        reply.status == "incomplete"
        and output.type == "model_output"
        and output.content == []
        and output.error is not None
        and output.error.details is not None
        and output.error.details[0]["reason"] == "SAFETY"
    )


def _null_output(reply: Interaction) -> bool:
    steps = reply.steps or []
    return [step.type for step in steps] == ["thought", "model_output"] and steps[1].content is None


CONTENT_FAULTS: list[tuple[str, Callable[[Interaction], bool]]] = [
    ("refusal", _safety_stop),
    ("pause_turn", lambda reply: reply.status == "incomplete" and "ACTION: " in text_of(reply)),
    ("truncation", lambda reply: reply.status == "incomplete" and "ACTION: " not in text_of(reply)),
    ("empty", lambda reply: reply.status == "completed" and text_of(reply) == ""),
    ("malformed", lambda reply: text_of(reply) == MALFORMED_REPLY),
    ("leak_key", lambda reply: "test-key" in text_of(reply)),
    ("empty_choices", lambda reply: reply.steps == [] and reply.usage is not None and reply.usage.total_tokens > 0),
    ("null_message", _null_output),
    ("expire_handle", lambda reply: REMEMBERED in text_of(reply)),
]


@pytest.mark.parametrize(("kind", "check"), CONTENT_FAULTS, ids=[kind for kind, _ in CONTENT_FAULTS])
def test_a_content_fault_shapes_only_its_reply(kind: str, check: Callable[[Interaction], bool]) -> None:
    with _faulted(kind) as provider, client_for(provider) as client:
        assert check(ask(client, [user(SHOWN)]))
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


def test_an_html_page_is_a_200_the_sdk_raises_as_an_api_error_without_a_status_class() -> None:
    with _faulted("html_page") as provider, client_for(provider) as client:
        with pytest.raises(_interactions.APIError) as raised:
            ask(client, [user(SHOWN)])
    assert not isinstance(raised.value, _interactions.APIStatusError) and raised.value.status_code == 200


def test_a_garbled_body_cannot_be_read() -> None:
    with _faulted("garbled") as provider, client_for(provider) as client:
        with pytest.raises(_interactions.APIResponseValidationError):
            ask(client, [user(SHOWN)])


def test_a_garbled_stream_yields_a_line_that_is_no_event() -> None:
    """The SDK does not raise on a data line that is not JSON: it hands the raw text on as the event."""
    with _faulted("garbled") as provider, client_for(provider) as client:
        events = stream(client, [user(SHOWN)])
    assert isinstance(events[1], str) and not hasattr(events[1], "event_type")
    assert events[-1].event_type == "interaction.completed"


def test_a_cut_stream_ends_after_its_first_text_and_never_completes() -> None:
    with _faulted("stream_cut") as provider, client_for(provider) as client:
        seen: list[Any] = []
        with pytest.raises(_interactions.APIConnectionError):
            for event in ask(client, [user(SHOWN)], stream=True):
                seen.append(event)
    assert seen[-1].event_type == "step.delta" and seen[-1].delta.type == "text"
    assert "interaction.completed" not in [event.event_type for event in seen]


def test_a_cut_non_streamed_request_gets_no_response() -> None:
    with _faulted("stream_cut") as provider, client_for(provider) as client:
        with pytest.raises(_interactions.APIConnectionError):
            ask(client, [user(SHOWN)])


def test_a_context_overflow_fault_is_the_input_too_long_400_for_that_request_only() -> None:
    with _faulted("context_overflow") as provider, client_for(provider) as client:
        with pytest.raises(_interactions.BadRequestError) as raised:
            ask(client, [user(SHOWN)])
        assert google_error(raised).endswith("exceeds the maximum number of tokens allowed (0).")
        assert REMEMBERED in text_of(ask(client, [user(SHOWN)]))


def test_every_fault_kind_has_an_interactions_test() -> None:
    tested = {"rate_limit", "server_error", "overloaded", "html_page", "garbled", "stream_cut", "context_overflow"}
    tested |= {kind for kind, _ in CONTENT_FAULTS}
    assert tested == set(FAULT_KINDS)

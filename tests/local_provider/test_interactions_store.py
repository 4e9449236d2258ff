"""Stored interactions on the Gemini Interactions wire, through the real google-genai SDK over real HTTP.

`store` defaults to true, so an interaction created without `store: false` can be continued by its
id: the next request sends only its new steps. The policy notes a level's beacon only in the thought
of the turn that saw it, so a dark frame answered with the beacon's door shows that the stored
thought was read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import _interactions

from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider

from .test_interactions import (
    DARK,
    FORGOTTEN,
    MODEL,
    REMEMBERED,
    SHOWN,
    SUMMARIES,
    SYSTEM,
    Interaction,
    accumulated,
    ask,
    client_for,
    google_error,
    replayed,
    text_of,
    user,
)


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with LocalProvider() as provider, client_for(provider) as sdk_client:
        yield sdk_client


def create(client: genai.Client, given: Any, **params: Any) -> Interaction:
    """A request that leaves `store` unset, as most clients do."""
    settings: dict[str, Any] = {"system_instruction": SYSTEM, "generation_config": SUMMARIES, **params}
    return client.interactions.create(model=MODEL, input=given, **settings)


def test_an_interaction_created_with_the_default_store_is_continued_by_its_id(client: genai.Client) -> None:
    first = create(client, SHOWN)
    assert REMEMBERED in text_of(create(client, DARK, previous_interaction_id=first.id))
    assert FORGOTTEN in text_of(create(client, DARK))  # the control: without the stored thought, a guess


def test_a_continuation_reads_the_stored_steps_of_every_interaction_it_follows(client: genai.Client) -> None:
    """The second interaction stored its whole conversation, so the third still reads the first's thought."""
    first = create(client, SHOWN)
    second = create(client, [user(DARK)], previous_interaction_id=first.id)
    assert REMEMBERED in text_of(create(client, [user(DARK)], previous_interaction_id=second.id))


def test_a_continuation_is_billed_as_the_whole_conversation_replayed(client: genai.Client) -> None:
    first = create(client, [user(SHOWN)])
    continued = create(client, [user(DARK)], previous_interaction_id=first.id).usage
    replayed_whole = ask(client, [user(SHOWN), *replayed(first), user(DARK)]).usage
    assert continued is not None and replayed_whole is not None
    assert continued.total_input_tokens == replayed_whole.total_input_tokens > 0


def test_a_streamed_interaction_is_stored_too(client: genai.Client) -> None:
    events = list(create(client, SHOWN, stream=True))
    assert [step["type"] for step in accumulated(events)] == ["thought", "model_output"]
    assert REMEMBERED in text_of(create(client, DARK, previous_interaction_id=events[0].interaction.id))


def test_an_interaction_created_with_store_false_is_not_kept(client: genai.Client) -> None:
    first = create(client, SHOWN, store=False)
    with pytest.raises(_interactions.NotFoundError) as raised:
        create(client, DARK, previous_interaction_id=first.id)
    assert google_error(raised, "NOT_FOUND") == f"Interaction '{first.id}' was not found."


def test_a_continuation_that_replays_the_stored_steps_again_is_a_400_naming_the_input_step(
    client: genai.Client,
) -> None:
    """The stored steps come first, so the thought sent again follows the very thought it repeats."""
    first = create(client, [user(SHOWN)])
    with pytest.raises(_interactions.BadRequestError) as raised:
        create(client, [user(SHOWN), *replayed(first), user(DARK)], previous_interaction_id=first.id)
    assert "input[1]: this thought step was produced in another place" in google_error(raised)


def test_expire_handle_forgets_every_stored_interaction() -> None:
    with LocalProvider(faults=[Fault(at=2, kind="expire_handle")]) as provider, client_for(provider) as client:
        first = create(client, SHOWN)
        with pytest.raises(_interactions.NotFoundError):
            create(client, DARK, previous_interaction_id=first.id)

"""The local provider's service state (local_provider/service.py): what one provider instance issued
and stored, a new instance opened on the same service folder continues, through the real SDKs over
real HTTP, as a real provider's account outlives its client; an instance without the folder refuses
it as another account's. A run resumed after a kill depends on it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google.genai import _interactions

from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider
from turnstate.local_provider.service import KEY_FILE, ChainStore, Journal, ServiceStateError
from turnstate.session.endpoint import RunSetupError, open_endpoint
from turnstate.session.profile_sections import ClientConfig

from . import test_interactions as gemini
from . import test_messages as claude
from . import test_responses as responses

REMEMBERED = responses.REMEMBERED
RESPONSES_JOURNAL = "openai.responses.jsonl"
CHAINED = 100


# --- each wire's continuation, begun on one provider and continued on another ----------------------


def stored_response(client: openai.OpenAI) -> str:
    return client.responses.create(model=responses.MODEL, input=[responses.user(responses.SHOWN)]).id


def continued_response(client: openai.OpenAI, response_id: str) -> str:
    dark = [responses.user(responses.DARK)]
    return client.responses.create(model=responses.MODEL, input=dark, previous_response_id=response_id).output_text


def encrypted_history(client: openai.OpenAI) -> list[responses.Item]:
    return responses.first_turn(client)[0]


def replayed_encrypted(client: openai.OpenAI, history: list[responses.Item]) -> str:
    return responses.ask(client, [*history, responses.user(responses.DARK)]).output_text


def signed_history(client: anthropic.Anthropic) -> list[claude.Turn]:
    return claude.first_turn(client)[0]


def replayed_signed(client: anthropic.Anthropic, history: list[claude.Turn]) -> str:
    return claude.text_of(claude.ask(client, [*history, claude.user(claude.DARK)]))


def stored_interaction(client: Any) -> str:
    interaction = client.interactions.create(model=gemini.MODEL, input=gemini.SHOWN, system_instruction=gemini.SYSTEM)
    return str(interaction.id)


def continued_interaction(client: Any, interaction_id: str) -> str:
    continued = client.interactions.create(
        model=gemini.MODEL, input=gemini.DARK, system_instruction=gemini.SYSTEM, previous_interaction_id=interaction_id
    )
    return gemini.text_of(continued)


def thought_history(client: Any) -> list[gemini.Step]:
    return gemini.first_turn(client)[0]


def replayed_thought(client: Any, history: list[gemini.Step]) -> str:
    return gemini.text_of(gemini.ask(client, [*history, gemini.user(gemini.DARK)]))


@dataclass(frozen=True)
class Continuation:
    """A conversation a provider begins and another continues, and how a provider of another service
    refuses it (the exception, and words of its message)."""

    client_for: Callable[[LocalProvider], AbstractContextManager[Any]]
    begin: Callable[[Any], Any]
    go_on: Callable[[Any, Any], str]
    refused: type[Exception]
    refusal: str


CONTINUATIONS = {
    "a responses previous_response_id": Continuation(
        responses.client_for, stored_response, continued_response, openai.NotFoundError, "previous_response_not_found"
    ),
    "replayed encrypted reasoning": Continuation(
        responses.client_for, encrypted_history, replayed_encrypted, openai.BadRequestError, "invalid_encrypted_content"
    ),
    "a replayed anthropic thinking signature": Continuation(
        claude.client_for, signed_history, replayed_signed, anthropic.BadRequestError, "Invalid `signature`"
    ),
    "a gemini previous_interaction_id": Continuation(
        gemini.client_for, stored_interaction, continued_interaction, _interactions.NotFoundError, "was not found"
    ),
    "a replayed gemini thought signature": Continuation(
        gemini.client_for, thought_history, replayed_thought, _interactions.BadRequestError, "signature is not valid"
    ),
}


@pytest.mark.parametrize("continuation", CONTINUATIONS.values(), ids=CONTINUATIONS.keys())
def test_a_conversation_begun_on_one_provider_continues_on_another_opened_on_the_same_service_dir_only(
    continuation: Continuation, tmp_path: Path
) -> None:
    with LocalProvider(service_dir=tmp_path) as first, continuation.client_for(first) as client:
        begun = continuation.begin(client)

    with LocalProvider(service_dir=tmp_path) as second, continuation.client_for(second) as client:
        assert REMEMBERED in continuation.go_on(client, begun)

    with LocalProvider() as other, continuation.client_for(other) as client:
        with pytest.raises(continuation.refused) as raised:
            continuation.go_on(client, begun)
    assert continuation.refusal in str(getattr(raised.value, "body", None))


# --- the folder ------------------------------------------------------------------------------------


def test_stored_conversations_are_written_in_bytes_linear_in_the_conversation(tmp_path: Path) -> None:
    """Each response continues the one before: the chain grows by one turn a request, and a line holds
    only that turn, so the last half of the lines weighs what the first half does (a line holding its
    whole chain would make it three times as heavy); the chain is rebuilt from them whole on the next
    provider."""
    sizes = []
    with (
        LocalProvider(service_dir=tmp_path, context_window=10**7) as provider,
        responses.client_for(provider) as client,
    ):
        response_id = stored_response(client)
        sizes.append((tmp_path / RESPONSES_JOURNAL).stat().st_size)
        for _ in range(CHAINED - 1):
            response_id = client.responses.create(
                model=responses.MODEL, input="continue", previous_response_id=response_id, max_output_tokens=64
            ).id
            sizes.append((tmp_path / RESPONSES_JOURNAL).stat().st_size)
    first_half, last_half = sizes[CHAINED // 2 - 1], sizes[-1] - sizes[CHAINED // 2 - 1]

    assert last_half <= 1.2 * first_half
    with LocalProvider(service_dir=tmp_path, context_window=10**7) as again, responses.client_for(again) as client:
        assert REMEMBERED in continued_response(client, response_id)


def test_a_chain_cut_at_its_front_is_stored_as_what_it_added_and_rebuilt_exactly(tmp_path: Path) -> None:
    """`truncation: auto` drops a continued chain's oldest items: the line says how many, and holds
    only the new ones; a chain that does not continue the one it names is stored whole."""
    journal = tmp_path / RESPONSES_JOURNAL
    store = ChainStore(Journal(journal))

    def item(name: str) -> dict[str, object]:
        return {"id": name}

    store.keep("a", None, [item("u1")], [item("r1")])
    store.keep("b", "a", [*store.chain("a")[1:], item("u2")], [item("r2")])  # one item cut
    store.keep("c", "b", [item("u3b")], [item("r3")])  # all of b's chain and one new item cut
    store.keep("d", "c", [*store.chain("c"), item("u4")], [item("r4")])
    store.keep("e", "d", [item("elsewhere")], [item("r5")])  # not d's chain: whole
    expected = {name: store.chain(name) for name in "abcde"}
    store.close()

    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(line["continued"], line["dropped"], line["added"]) for line in lines] == [
        (None, 0, [item("u1")]),
        ("a", 1, [item("u2")]),
        ("b", 3, [item("u3b")]),
        ("c", 0, [item("u4")]),
        ("d", 4, [item("elsewhere")]),
    ]
    reopened = ChainStore(Journal(journal))
    assert {name: reopened.chain(name) for name in "abcde"} == expected
    assert expected["e"] == (item("elsewhere"), item("r5"))


def test_the_service_folder_is_owner_only_and_so_is_every_file_in_it(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "service"
    with LocalProvider(service_dir=folder) as provider, responses.client_for(provider) as client:
        stored_response(client)

    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(path.name for path in folder.iterdir()) == sorted([KEY_FILE, "lock", RESPONSES_JOURNAL])
    assert {stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()} == {0o600}


def test_a_service_dir_open_in_another_provider_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with LocalProvider(service_dir=tmp_path):
        with pytest.raises(ServiceStateError, match="another local provider has this service open"):
            LocalProvider(service_dir=tmp_path).start()
        with pytest.raises(RunSetupError, match="another local provider has this service open"):
            with open_endpoint(ClientConfig(), service_dir=tmp_path):
                pass
    with LocalProvider(service_dir=tmp_path):  # released when the first one stopped
        pass


def test_a_service_folder_others_may_read_is_refused_naming_the_fix(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    with pytest.raises(ServiceStateError, match="chmod 700"):
        LocalProvider(service_dir=tmp_path).start()


def test_a_last_line_cut_short_by_a_kill_is_dropped_and_what_follows_is_stored_whole(tmp_path: Path) -> None:
    with LocalProvider(service_dir=tmp_path) as first, responses.client_for(first) as client:
        begun = stored_response(client)
    with open(tmp_path / RESPONSES_JOURNAL, "ab") as journal:
        journal.write(b'{"id": "resp_cut", "continued": nu')

    with LocalProvider(service_dir=tmp_path) as second, responses.client_for(second) as client:
        dark = [responses.user(responses.DARK)]
        second_id = client.responses.create(model=responses.MODEL, input=dark, previous_response_id=begun).id
    with LocalProvider(service_dir=tmp_path) as third, responses.client_for(third) as client:
        assert REMEMBERED in continued_response(client, second_id)


def test_a_journal_line_the_provider_did_not_write_is_an_error_naming_its_line(tmp_path: Path) -> None:
    with LocalProvider(service_dir=tmp_path) as first, responses.client_for(first) as client:
        stored_response(client)
    with open(tmp_path / RESPONSES_JOURNAL, "ab") as journal:
        journal.write(b'{"id": "resp_x", "continued": "resp_nowhere", "dropped": 0, "added": [], "produced": []}\n')

    with pytest.raises(ServiceStateError, match=r"line 2: it continues 'resp_nowhere', which no line before"):
        LocalProvider(service_dir=tmp_path).start()


def test_what_an_expired_handle_forgets_stays_forgotten_on_the_next_provider(tmp_path: Path) -> None:
    with LocalProvider(service_dir=tmp_path, faults=[Fault(at=2, kind="expire_handle")]) as first:
        with responses.client_for(first) as client:
            forgotten = stored_response(client)
            kept = stored_response(client)  # the faulted request: it forgets, then stores its own

    with LocalProvider(service_dir=tmp_path) as second, responses.client_for(second) as client:
        assert REMEMBERED in continued_response(client, kept)
        with pytest.raises(openai.NotFoundError, match=f"Previous response with id '{forgotten}' not found"):
            continued_response(client, forgotten)

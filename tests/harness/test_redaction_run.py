"""Redaction end to end (issue 30): test_redaction.py holds the Redactor to its rules; here every
writer of a run folder is held to the Redactor. The model repeats the run's API key (a leak_key
fault) and, in every reply, the latest opaque value the provider handed it, so each text the run
writes holds secrets unless its writer redacted it; then every line of every file in the folder,
events.jsonl and the report included, is searched for the key and for each opaque value the
provider issued."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pytest

from turnstate.durable.layout import EVENTS
from turnstate.local_provider import policy
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.server import LocalProvider
from turnstate.reports.folder import write_report
from turnstate.session.profile import PROFILES_DIR, load_profile
from turnstate.session.runner import Runner

from .test_run import artifact_texts, with_changes

KEY = "sk-proj-" + "Q7vX2mLp9RtY4wZ8" * 3  # as long as a real project key
KEY_ENV = "TURNSTATE_TEST_REDACTION_KEY"
OPAQUE_KEYS = ("encrypted_content", "signature")
# A profile whose replies carry opaque state, and the address its SDK takes.
WIRES = {"local-openai-continuous": "openai_base_url", "local-anthropic-continuous": "base_url"}
ACTIONS = 6


def opaque_values(value: object) -> Iterator[str]:
    """Every encrypted_content and signature in a request body or a list of native items."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key in OPAQUE_KEYS and isinstance(inner, str) and inner:
                yield inner
            else:
                yield from opaque_values(inner)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for inner in value:
            yield from opaque_values(inner)


@pytest.mark.parametrize("name", WIRES)
def test_a_run_whose_model_repeats_its_key_and_the_opaque_values_it_was_handed_writes_neither_in_any_file(
    tmp_path, monkeypatch, name
):
    monkeypatch.setenv(KEY_ENV, KEY)

    def repeating_what_it_was_handed(system: str, messages: Sequence[Mapping[str, object]]) -> str:
        handed = list(opaque_values(provider.request_log[-1]))  # this request's body: the replayed state
        reply = policy.reply(system, messages)
        return f"{reply}\nI was handed {handed[-1]}" if handed else reply

    provider = LocalProvider(reply=repeating_what_it_was_handed, faults=[Fault(at=2, kind="leak_key")])
    with provider:
        client = {"base_url": getattr(provider, WIRES[name]), "api_key_env": KEY_ENV}
        profile = with_changes(
            load_profile(PROFILES_DIR / f"{name}.yaml"), client=client, agent={"max_actions": ACTIONS}
        )
        result = Runner(profile, tmp_path).run()
        issued = {blob for body in provider.request_log for blob in opaque_values(body)}
    issued |= set(opaque_values(result.accepted_state.items))  # the last reply's, never sent back
    assert result.accepted_actions == ACTIONS and len(issued) >= ACTIONS
    write_report(result.artifacts)
    files = artifact_texts(result.artifacts)
    assert {EVENTS, "run_meta.json", "calls.jsonl", "checkpoints.sqlite3", "report.html"} <= set(files)
    for file, text in files.items():
        for number, line in enumerate(text.splitlines(), start=1):
            assert KEY not in line, f"{file}: line {number} holds the API key"
            found = sum(blob in line for blob in issued)
            assert not found, f"{file}: line {number} holds opaque values the provider issued ({found})"
    events = files[EVENTS]  # the texts that held them reached the log, redacted
    assert "Authorization: Bearer [redacted]" in events and events.count("I was handed [redacted]") >= ACTIONS - 2

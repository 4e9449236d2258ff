"""Where a run's adapter points (the embedded local provider, or a remote base_url with a key from the
env), and the adapter connected there with the profile's request settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from turnstate.adapters.contract import Endpoint, ProviderAdapter, ToolSpec
from turnstate.adapters.registry import AdapterDescriptor
from turnstate.durable.state_home import STATE_VARIABLE, state_home
from turnstate.local_provider.faults import Fault
from turnstate.local_provider.recording_policy import RecordingModel
from turnstate.local_provider.server import LocalProvider
from turnstate.local_provider.service import ServiceStateError
from turnstate.session import scaffold
from turnstate.session.profile import Profile
from turnstate.session.profile_checks import recorded_actions
from turnstate.session.profile_sections import ClientConfig, is_http_url

LOCAL_API_KEY = "local-provider-key"
SERVICES_VARIABLE = STATE_VARIABLE  # where the embedded provider's services live: $XDG_STATE_HOME/turnstate/


def local_service_dir(run_id: str) -> Path:
    """Where the embedded local provider of the run in `run_dir` keeps its service (keys, stored
    conversations), as a real provider keeps its account's: outside the run folder, whose artifacts
    never hold opaque state, in the user's state folder ($XDG_STATE_HOME, else ~/.local/state), one
    per run (two runs may play at once). A run that ends deletes it; `turnstate prune` too."""
    return state_home() / "local-provider" / run_id


class RunSetupError(RuntimeError):
    """The run cannot start (a missing key variable, ...); the message says what to do."""


def connect_adapter(
    profile: Profile,
    descriptor: AdapterDescriptor,
    actions: tuple[ToolSpec, ...],
    tools: tuple[ToolSpec, ...],
    endpoint: Endpoint,
) -> ProviderAdapter:
    """The profile's adapter connected to `endpoint` with its request settings, and with
    `request.action_grammar` the grammar of `actions` in the field the adapter sends it in."""
    adapter, settings, grammar = descriptor.load(), profile.request_settings(), profile.request.action_grammar
    if grammar is not None and adapter.grammar_field is not None:  # the profile's validation checked the two agree
        if tools:  # llama-server refuses the two together, and rightly: no reply could call a tool
            raise RunSetupError(
                f"request.action_grammar holds every reply to an ACTION line, so the tools offered "
                f"({', '.join(tool.name for tool in tools)}) could never be called; "
                "remove request.action_grammar to offer tools"
            )
        try:
            text = scaffold.action_grammar(actions, thinking=grammar == "thinking")
        except ValueError as error:
            raise RunSetupError(f"request.action_grammar: {error}; remove it for this environment") from None
        settings = replace(settings, extra_body={**settings.extra_body, adapter.grammar_field: text})
    return adapter.connect(endpoint, settings)


def recorded_game(profile: Profile) -> str | None:
    """The game a local recording is played for: an ARC-AGI-3 game's id, when the environment names one."""
    game_id = profile.environment.options.get("game_id")
    return game_id if isinstance(game_id, str) else None


@contextmanager
def open_endpoint(
    client: ClientConfig, service_dir: Path | None = None, game_id: str | None = None
) -> Iterator[Endpoint]:
    """Start the embedded local provider for `base_url: local`; otherwise read the key from the env.

    `service_dir` (local only) keeps the local provider's service there: its keys and stored
    conversations, so a run resumed in a new process continues what the old provider issued, as a
    real provider's account outlives its client. Without it the service ends with the provider.
    `game_id` is the ARC-AGI-3 game played, whose recording a local `recording` names (profile.recorded_actions)."""
    if not client.is_local:
        assert client.api_key_env is not None  # the profile validator guarantees it
        api_key = os.environ.get(client.api_key_env)
        if not api_key:
            raise RunSetupError(f"client.api_key_env names {client.api_key_env}, which is not set; export it")
        yield _endpoint(client, _base_url(client), api_key, is_local=False)
        return
    local = client.local
    # Nothing reads the request log of a run's own provider, so it keeps none (a long run's request
    # bodies would otherwise be most of its memory).
    options: dict[str, Any] = {"request_log_size": 0, "service_dir": service_dir}
    if local is not None:
        if local.context_window is not None:
            options["context_window"] = local.context_window
        options["faults"] = [
            Fault(at=fault.at, kind=fault.kind, retry_after_seconds=fault.retry_after_seconds) for fault in local.faults
        ]
        if local.recording is not None:
            options["model"] = _recording_model(local.recording, game_id)
    with ExitStack() as stack:
        try:
            provider = stack.enter_context(LocalProvider(**options))
        except ServiceStateError as error:  # the folder cannot be used: the message says what to do
            raise RunSetupError(str(error)) from None
        yield _endpoint(client, provider.base_url, LOCAL_API_KEY, is_local=True)


def _recording_model(recording: str, game_id: str | None) -> RecordingModel:
    """The local model that plays the recording of `game_id` (read again: it may have changed since validation)."""
    if game_id is None:
        raise RunSetupError("client.local.recording: a recording plays an ARC-AGI-3 game, and no game_id is played")
    try:
        return RecordingModel(recorded_actions(recording, game_id))
    except ValueError as error:
        raise RunSetupError(f"client.local.recording: {error}") from None


def _base_url(client: ClientConfig) -> str:
    """The profile's base_url, or the URL its base_url_env variable holds when that is set."""
    if client.base_url_env is None or not os.environ.get(client.base_url_env):
        return client.base_url
    url = os.environ[client.base_url_env]
    if not is_http_url(url):
        raise RunSetupError(
            f"client.base_url_env names {client.base_url_env}, which holds {url!r}, not an http(s) URL with a "
            f"host; set it to the server's root such as http://127.0.0.1:8080/v1, or unset it for {client.base_url}"
        )
    return url


def _endpoint(client: ClientConfig, base_url: str, api_key: str, *, is_local: bool) -> Endpoint:
    """The Endpoint an adapter connects to, with the profile's deadline and reply cap."""
    return Endpoint(
        base_url,
        api_key,
        is_local=is_local,
        timeout_seconds=client.timeout_seconds,
        max_reply_bytes=client.max_reply_bytes,
    )

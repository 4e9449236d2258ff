"""The local adapter registry: the only adapter ids a profile may name.

A profile selects an adapter by a stable local id; the harness never downloads or executes code
named by a profile. Each descriptor records what a reviewer needs: the provider, the API surface,
the implementation path and version, which strategies it implements, and its review status.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

from turnstate.adapters.contract import ProviderAdapter

ReviewStatus = Literal["unreviewed", "provider_reference", "provider_approved"]


@dataclass(frozen=True)
class AdapterDescriptor:
    adapter_id: str
    provider: str
    api_surface: str
    implementation: str  # "module:Class", importable
    version: str
    review_status: ReviewStatus
    strategies: tuple[str, ...]  # names of the strategy records it implements

    @property
    def implementation_path(self) -> str:
        """The source file, relative to the repository root (turnstate.adapters.x -> adapters/x.py)."""
        module = self.implementation.partition(":")[0]
        return module.removeprefix("turnstate.").replace(".", "/") + ".py"

    def load(self) -> type[ProviderAdapter]:
        module_name, class_name = self.implementation.split(":")
        return getattr(importlib.import_module(module_name), class_name)


ADAPTERS: dict[str, AdapterDescriptor] = {
    descriptor.adapter_id: descriptor
    for descriptor in (
        AdapterDescriptor(
            adapter_id="openai.chat_completions.v1",
            provider="openai-compatible",
            api_surface="chat.completions",
            implementation="turnstate.adapters.chat_completions:ChatCompletionsAdapter",
            version="1.0.0",
            review_status="unreviewed",
            strategies=("manual_rolling",),
        ),
        AdapterDescriptor(
            adapter_id="openai.responses.v1",
            provider="openai",
            api_surface="responses",
            implementation="turnstate.adapters.responses:ResponsesAdapter",
            version="1.0.0",
            review_status="provider_reference",
            strategies=("manual_rolling", "previous_response_id", "continuous_conversation"),
        ),
        AdapterDescriptor(
            adapter_id="xai.responses.v1",
            provider="xai",
            api_surface="responses",
            implementation="turnstate.adapters.xai_responses:XaiResponsesAdapter",
            version="1.0.0",
            review_status="unreviewed",
            strategies=("manual_rolling", "continuous_conversation"),
        ),
        AdapterDescriptor(
            adapter_id="anthropic.messages.v1",
            provider="anthropic",
            api_surface="messages",
            implementation="turnstate.adapters.anthropic_messages:MessagesAdapter",
            version="0.1.0",
            review_status="unreviewed",
            strategies=("manual_rolling", "continuous_conversation"),
        ),
        AdapterDescriptor(
            adapter_id="google.interactions.v1",
            provider="google",
            api_surface="interactions",
            implementation="turnstate.adapters.gemini_interactions:InteractionsAdapter",
            version="0.1.0",
            review_status="unreviewed",
            strategies=("manual_rolling", "continuous_conversation"),
        ),
        AdapterDescriptor(
            adapter_id="deepseek.chat_completions.v1",
            provider="deepseek",
            api_surface="chat_completions",
            implementation="turnstate.adapters.deepseek_chat:DeepSeekChatAdapter",
            version="0.1.0",
            review_status="unreviewed",
            strategies=("manual_rolling", "continuous_conversation"),
        ),
        AdapterDescriptor(
            adapter_id="open_source.chat_completions.v1",
            provider="open_source",
            api_surface="chat_completions",
            implementation="turnstate.adapters.open_source_chat:OpenSourceChatAdapter",
            version="0.1.0",
            review_status="unreviewed",
            strategies=("manual_rolling", "continuous_conversation"),
        ),
    )
}


class UnknownAdapter(KeyError):
    pass


def descriptor_for(adapter_id: str) -> AdapterDescriptor:
    try:
        return ADAPTERS[adapter_id]
    except KeyError:
        raise UnknownAdapter(
            f"adapter id {adapter_id!r} is not registered; registered ids: {', '.join(sorted(ADAPTERS))}"
        ) from None

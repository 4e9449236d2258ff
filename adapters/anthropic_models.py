"""What the Anthropic API refuses for some models, as data the adapter's validation and the local
provider's Messages wire both read (neither imports the other, so this module imports nothing).

Claude Opus 5 thinks adaptively only: a request with `thinking: {type: enabled, budget_tokens: N}`
is a 400 invalid_request_error (pydantic-ai's model profiles record it, and its recorded Opus 5
exchange sends `{type: adaptive, display: summarized}` with `output_config.effort`), so a profile
that asks for it is refused at validation, and the local provider answers it as the API does.
"""

from __future__ import annotations

ADAPTIVE_THINKING_ONLY = ("claude-opus-5",)  # model families: the name, or the name and a suffix


def takes_enabled_thinking(model: str) -> bool:
    """Whether `model` accepts `thinking.type: enabled` (a fixed budget) rather than adaptive only."""
    return not any(model == family or model.startswith(f"{family}-") for family in ADAPTIVE_THINKING_ONLY)


ENABLED_THINKING_REFUSED = (
    "thinking.type.enabled is not supported for this model; use thinking.type.adaptive "
    "and output_config.effort to control how much it thinks"
)
"""The local provider's message for it, which the adapter's validation also names."""

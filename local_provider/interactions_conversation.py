"""The Interactions wire's replay rules, what its model reads, and its token estimate.

Opaque state. Every reply is built from one token T (sealed.py). Its thought step's `signature`
seals {kind, token, after, thought, shown, output}: the private thought, a digest of the text of the
readable summary the step was issued with (empty without one), a digest of the text of the
model_output step issued with it, and `after`, the token of the thought the model had read last
(None on a conversation's first turn). With store=false the client replays every step it was given.

Rules, for the input's steps in order; the first one broken is a 400 INVALID_ARGUMENT that names the
step's index in `input`:
1. Altered. A thought step must carry its signature, which must open under the provider's key and
   match the step's own summary text, else "Thought signature is not valid" (so a thought from
   another provider, or from before a restart, fails too).
2. Misplaced. A thought step must be followed at once by the model_output step it was issued with:
   its text must be the one the signature pins.
3. Dropped. Every model_output step must come right after its thought step: this model always
   thinks, so a model output without one is a thought that was dropped.
4. Reordered. After the first thought read (the input may begin at any whole turn: dropping old
   turns only loses what they held), each thought must follow the thought it followed when it was
   produced.

What the model reads: the system instruction, the current turn (the text of the user_input steps
after the last model step, or all of them on a first turn), and its memory: the text of the earlier
user_input steps (from which it takes only notes, never an old frame's beacon), then the thought of
every replayed thought step, in order.

Token estimate (billing, caching and the context window): the system instruction counts as one
step; every step costs the per-message overhead plus its text, where a thought's text is its
summary and its signature (an opaque blob costs what it weighs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens
from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.google_words import InvalidRequest
from turnstate.local_provider.interactions_request import InteractionRequest, Step, text_of
from turnstate.local_provider.sealed import Sealer, digest

STATE_NAME = "gemini.interactions"
THOUGHT_KIND = "gemini.thought"
MODEL_STEPS = frozenset({"thought", "model_output"})


def interactions_sealer(exchange: Exchange) -> Sealer:
    """The key of this provider's thought signatures, made on its first Interactions request."""
    return exchange.state.get(STATE_NAME, Sealer)


@dataclass(frozen=True)
class Conversation:
    """An input that passed the rules, as the model reads it."""

    system: str
    current: tuple[Mapping[str, object], ...]
    """The current turn as {role, content} messages with text content."""
    memory: tuple[str, ...]
    """The earlier user texts, then the replayed thoughts: what the model is handed as memory."""
    last_link: str | None
    """The token of the last thought read: what the next thought follows."""
    units: tuple[Mapping[str, object], ...]
    """The prompt as the prefix cache compares it: the system instruction, then every step."""

    @property
    def unit_tokens(self) -> tuple[int, ...]:
        return tuple(step_tokens(unit) for unit in self.units)

    @property
    def prompt_tokens(self) -> int:
        return sum(self.unit_tokens)


def shown_digest(content: object) -> str:
    """What a signature pins of a summary or an output: its text, however its contents are split (a
    stream delivers text in pieces); a step without contents and one with no text pin the same."""
    return digest(text_of(content, separator=""))


def read_conversation(sealer: Sealer, request: InteractionRequest) -> Conversation:
    """Hold the request's steps to the module's rules; the conversation as the model reads it."""
    steps = request.steps
    thoughts: list[str] = []
    link: str | None = None
    for index, step in enumerate(steps):
        if step["type"] == "thought":
            payload = _opened_thought(sealer, steps, index)
            if link is not None and payload.get("after") != link:
                raise InvalidRequest(
                    f"input[{index}]: this thought step was produced in another place in the conversation; "
                    "replay thought steps verbatim, in their own turns and in the order they were produced."
                )
            thoughts.append(str(payload.get("thought", "")))
            link = str(payload["token"])
        elif step["type"] == "model_output" and (index == 0 or steps[index - 1]["type"] != "thought"):
            raise InvalidRequest(
                f"input[{index}]: this model_output step comes without the thought step it was generated with; "
                "replay every thought step, with its signature, right before its model_output step."
            )
    last = max((index for index, step in enumerate(steps) if step["type"] in MODEL_STEPS), default=-1)
    earlier = [text_of(step.get("content")) for step in steps[: last + 1] if step["type"] == "user_input"]
    current = tuple({"role": "user", "content": text_of(step.get("content"))} for step in steps[last + 1 :])
    system_unit: tuple[Mapping[str, object], ...] = (
        ({"type": "system_instruction", "text": request.system},) if request.system else ()
    )
    return Conversation(
        system=request.system,
        current=current,
        memory=(*earlier, *thoughts),
        last_link=link,
        units=(*system_unit, *steps),
    )


def step_tokens(step: Mapping[str, object]) -> int:
    """The estimate of one step (or of the system instruction, as a step of its own)."""
    kind = step.get("type")
    if kind == "thought":
        text = text_of(step.get("summary")) + str(step.get("signature") or "")
    elif kind == "system_instruction":
        text = str(step.get("text", ""))
    else:
        text = text_of(step.get("content"))
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)


def _opened_thought(sealer: Sealer, steps: Sequence[Step], index: int) -> dict[str, object]:
    """Rules 1 and 2 for the thought step at `index`: the payload its signature seals."""
    step = steps[index]
    if step.get("signature") is None:
        raise InvalidRequest(
            f"input[{index}].signature: a thought step must be replayed with the signature it was issued with."
        )
    payload = sealer.open(step["signature"])
    if (
        payload is None
        or payload.get("kind") != THOUGHT_KIND
        or payload.get("shown") != shown_digest(step.get("summary"))
    ):
        raise InvalidRequest(f"input[{index}].signature: Thought signature is not valid.")
    following = steps[index + 1] if index + 1 < len(steps) else None
    if following is None or following["type"] != "model_output":
        raise InvalidRequest(
            f"input[{index}]: a thought step must be followed right away by the model_output step it was issued with."
        )
    if payload.get("output") != shown_digest(following.get("content")):
        raise InvalidRequest(
            f"input[{index}].signature: Thought signature is not valid for input[{index + 1}]: "
            "that model_output step is not the one this thought was issued with."
        )
    return payload

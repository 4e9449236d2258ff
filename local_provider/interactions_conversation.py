"""The Interactions wire's stored interactions, its replay rules, what its model reads, and its
token estimate.

Stored interactions. `store` defaults to true (the docs: "The server enables state by default
(store=true)"; stored interactions are continued with `previous_interaction_id`), so every
interaction created without `store: false` is kept under its id: the steps of the conversation it
continued (a stored chain, then the request's input) followed by the steps it answered. The
provider's service keeps them (service.py): in memory, or in a service folder that a later provider
continues, as the state is the server's and not its client's (the docs: a stored interaction is
retrieved with interactions.get, and kept under the data retention policy). A request with
`previous_interaction_id` reads that chain with its own input steps appended; an id this provider
never stored (or forgot: the `expire_handle` fault forgets every stored interaction) is 404
NOT_FOUND "Interaction '<id>' was not found.". Only the conversation is kept: the tools, system
instruction and generation config are each request's own.

Opaque state. Every reply is built from one token T (sealed.py). Its thought step's `signature`
seals {kind, token, after, thought, shown, output}: the private thought, a digest of the text of the
readable summary the step was issued with (empty without one), a digest of the steps issued with it
(`issued_digest`: a model_output's text, or each function_call's id, name and arguments), and `after`,
the token of the thought the model had read last (None on a conversation's first turn). With
store=false the client replays every step it was given.

Rules, for the conversation's steps in order (a stored chain's, then the input's); the first one
broken is a 400 INVALID_ARGUMENT that names the step's index in `input`:
1. Altered. A thought step must carry its signature, which must open under the provider's key and
   match the step's own summary text, else "Thought signature is not valid" (so a thought from
   another service fails too; the key is the service's, service.py, so a provider opened on the same
   service folder verifies what an earlier one signed).
2. Misplaced. A thought step must be followed at once by the model_output step or the run of
   function_call steps it was issued with: the steps its signature pins.
3. Dropped. Every function_call step of the current turn (after the last user_input step) must
   come right after its thought step: the Interactions API carries a function call's thought
   signature on the thought step before it (google-genai 3.6's FunctionCallStep has no signature;
   the docs' thinking page: thought steps "appear chronologically alongside function calls"), and
   Gemini 3 refuses a current-turn function call whose signature is not returned (the "Thought
   signatures" docs: every function call of the current turn is strictly validated, earlier turns
   are not). A function_call step of an earlier turn needs no thought, so a client may replay calls
   it made up or got elsewhere. A reply that calls several functions is one thought step, then its
   calls in a row: the thought comes before the first (the "Thought signatures" docs: of parallel
   function calls only the first part carries the signature), so a call may also follow the call
   before it in the same reply. A model_output step needs no thought, in any turn: the "Thought
   signatures" docs make a missing signature a 4xx only "during function calling" (Vertex's page:
   history sent with part of its context left out may degrade the model's performance, and a
   request carrying another model's thoughts still succeeds), and google-genai 3.6's
   ModelOutputStepParam and ThoughtStepParam tie no output to a thought. So a text replayed without
   its thought, or written by another model, is taken, and the model reads no thought for it.
4. Reordered. After the first thought read (the input may begin at any whole turn: dropping old
   turns only loses what they held), each thought must follow the thought it followed when it was
   produced.
5. Undeclared. A function_call step of the input must name a function tool the request declares:
   the model is only offered, and can only have called, the functions in `tools`.
6. Orphaned. A function_result step's call_id must be the id of a function_call step earlier in the
   conversation (FunctionResultStep: "ID to match the ID from the function call block").
7. Unpaired. The calls of one reply (a run of function_call steps) must each be answered exactly
   once by the function_result steps right after them, in any order, before any other step comes
   or the conversation ends: an unanswered call, and a second result for a call, are refused in
   Google's words for a function call turn its response turn does not match ("Please ensure that
   the number of function response parts is equal to the number of function call parts of the
   function call turn", 400 INVALID_ARGUMENT from generateContent, as gemini-cli issues #4217 and
   #16132 quote it; no Interactions traffic is recorded, and the Interactions API serves the same
   models), with the step it names.

What the model reads: the system instruction, the current turn (the user_input and function_result
steps after the last model step, or all of them on a first turn, in order: a user input as a user
message of its text, a result as `{"role": "tool", "content": <its string, the text of its
contents, or its object as JSON>}`, so a turn of results alone is a turn too), and its memory: the text of the earlier
user_input steps (from which it takes only notes, never an old frame's beacon), then the thought of
every replayed thought step, in order.

Token estimate (billing, caching and the context window): the system instruction counts as one
step; every step costs the per-message overhead plus its text, where a thought's text is its
summary and its signature (an opaque blob costs what it weighs), a function call's its name and
arguments as JSON, and a function result's its result as the model reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from turnstate.adapters.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_text_tokens, held_image_tokens
from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.google_words import InvalidRequest
from turnstate.local_provider.interactions_request import InteractionRequest, Step, text_of
from turnstate.local_provider.sealed import Sealer, digest
from turnstate.local_provider.stored import ChainStore, StoredState, stored_state

STATE_NAME = "gemini.interactions"
THOUGHT_KIND = "gemini.thought"
ISSUED_STEPS = frozenset({"model_output", "function_call"})
"""What a thought step is issued with (the step its signature pins)."""
MODEL_STEPS = frozenset({"thought", *ISSUED_STEPS})


def interactions_state(exchange: Exchange) -> StoredState:
    """This provider's Interactions state (the key of its signatures, its stored interactions)."""
    return stored_state(exchange, STATE_NAME)


@dataclass(frozen=True)
class Conversation:
    """A conversation that passed the rules, as the model reads it."""

    steps: tuple[Step, ...]
    """Every step of the conversation: a stored chain's, then the input's."""
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


def issued_digest(steps: Sequence[Mapping[str, object]]) -> str:
    """What a thought's signature pins of the steps it was issued with: a model output's text, or
    each function call's id, name and arguments, in order."""
    return digest([_issued(step) for step in steps])


def _issued(step: Mapping[str, object]) -> object:
    if step.get("type") == "function_call":
        return [step.get("id"), step.get("name"), step.get("arguments")]
    return text_of(step.get("content"), separator="")


def issued_with(steps: Sequence[Step], index: int) -> list[Step]:
    """The steps a thought at `index` was issued with, as they follow it: one model output, or the
    run of function calls it made (a reply may call several functions)."""
    following = list(steps[index + 1 : index + 2])
    if not following or following[0]["type"] != "function_call":
        return following
    for step in steps[index + 2 :]:
        if step["type"] != "function_call":
            break
        following.append(step)
    return following


def read_conversation(state: StoredState, request: InteractionRequest) -> Conversation:
    """The stored chain the request continues, then its input, held to the module's rules; the
    conversation as the model reads it."""
    stored = _stored_chain(state.store, request.previous_interaction_id)
    steps = (*stored, *request.steps)
    thoughts, link = _check_steps(state.sealer, steps, len(stored), request)
    last = max((index for index, step in enumerate(steps) if step["type"] in MODEL_STEPS), default=-1)
    earlier = [text_of(step.get("content"), images=False) for step in steps[: last + 1] if step["type"] == "user_input"]
    current = tuple(
        {"role": "tool" if step["type"] == "function_result" else "user", "content": readable_text(step)}
        for step in steps[last + 1 :]
    )
    system_unit: tuple[Mapping[str, object], ...] = (
        ({"type": "system_instruction", "text": request.system},) if request.system else ()
    )
    return Conversation(
        steps=steps,
        system=request.system,
        current=current,
        memory=(*earlier, *thoughts),
        last_link=link,
        units=(*system_unit, *steps),
    )


def readable_text(step: Mapping[str, object], *, images: bool = True) -> str:
    """A user_input's or function_result's text as the model reads it, with `images` read (vision.py);
    without, the text the estimate counts (its images are counted as images)."""
    if step.get("type") != "function_result":
        return text_of(step.get("content"), images=images)
    result = step.get("result")
    if isinstance(result, str):
        return result
    return text_of(result, images=images) if isinstance(result, list) else json.dumps(result)


def step_tokens(step: Mapping[str, object]) -> int:
    """The estimate of one step (or of the system instruction, as a step of its own)."""
    kind = step.get("type")
    if kind == "thought":
        text = text_of(step.get("summary")) + str(step.get("signature") or "")
    elif kind == "system_instruction":
        text = str(step.get("text", ""))
    elif kind == "function_call":
        text = str(step.get("name", "")) + json.dumps(step.get("arguments"))
    else:
        text = readable_text(step, images=False)
        return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text) + held_image_tokens(step)
    return MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)


# --- the rules -------------------------------------------------------------------------------------


def _stored_chain(store: ChainStore, previous_interaction_id: str | None) -> tuple[Step, ...]:
    if previous_interaction_id is None:
        return ()
    chain = store.chain(previous_interaction_id)
    if chain is None:
        raise InvalidRequest(f"Interaction '{previous_interaction_id}' was not found.", status=404)
    return chain


def _check_steps(
    sealer: Sealer, steps: Sequence[Step], stored: int, request: InteractionRequest
) -> tuple[list[str], str | None]:
    """Rules 1-7 over `steps`, the first `stored` of them a stored chain's; (the thoughts read, the last link)."""

    def where(index: int) -> str:
        if index >= stored:
            return f"input[{index - stored}]"
        return f"step {index} of interaction '{request.previous_interaction_id}'"

    declared = {tool.get("name") for tool in request.functions}
    turn_start = 1 + max((index for index, step in enumerate(steps) if step["type"] == "user_input"), default=-1)
    thoughts: list[str] = []
    link: str | None = None
    pairing = _Pairing(where)
    for index, step in enumerate(steps):
        kind = str(step["type"])
        pairing.check(steps, index)
        if kind == "thought":
            payload = _opened_thought(sealer, steps, index, where)
            if link is not None and payload.get("after") != link:
                raise InvalidRequest(
                    f"{where(index)}: this thought step was produced in another place in the conversation; "
                    "replay thought steps verbatim, in their own turns and in the order they were produced."
                )
            thoughts.append(str(payload.get("thought", "")))
            link = str(payload["token"])
        elif _needs_thought(kind, index, turn_start) and not _follows_its_thought(steps, index):
            raise InvalidRequest(
                f"{where(index)}: this {kind} step comes without the thought step it was generated with; "
                f"replay every thought step, with its signature, right before its {kind} step."
            )
        if kind == "function_call" and index >= stored and step["name"] not in declared:
            raise InvalidRequest(
                f"{where(index)}.name: function '{step['name']}' is not declared in `tools`; "
                "a function call can only name a function tool of the request."
            )
    pairing.check(steps, len(steps))
    return thoughts, link


def _needs_thought(kind: str, index: int, turn_start: int) -> bool:
    """Rule 3: only a function call of the current turn needs its thought; a model output never does."""
    return kind == "function_call" and index >= turn_start


def _follows_its_thought(steps: Sequence[Step], index: int) -> bool:
    """Rule 3 for a function call: right after a thought step, or after the call before it in the
    same reply (the thought before a reply's first call carries the signature of them all)."""
    return index > 0 and steps[index - 1]["type"] in ("thought", "function_call")


# Google's words for a function call turn and its response turn that do not pair up (generateContent
# answers them as a 400 INVALID_ARGUMENT; gemini-cli issues #4217, #16132).
UNPAIRED = (
    "Please ensure that the number of function response parts is equal to the number of function call parts "
    "of the function call turn"
)


class _Pairing:
    """Rules 6 and 7, step by step: the calls a reply made (a run of function_call steps) are each
    answered exactly once by the function_result steps right after them, before any other step."""

    def __init__(self, where: Callable[[int], str]) -> None:
        self.where = where
        self.open: dict[object, int] = {}
        """The calls of the latest run not answered yet: id -> index."""
        self.answered: dict[object, int] = {}
        """Every call answered so far: id -> the index of its result."""

    def check(self, steps: Sequence[Step], index: int) -> None:
        """Check the step at `index` (the end of the conversation when `index` is past the last)."""
        if index == len(steps):
            self._close(index, None)
            return
        step = steps[index]
        if step["type"] == "function_result":
            self._answer(index, step["call_id"])
            return
        if step["type"] != "function_call" or index == 0 or steps[index - 1]["type"] != "function_call":
            self._close(index, step["type"])
        if step["type"] == "function_call":
            self.open[step["id"]] = index

    def _answer(self, index: int, call_id: object) -> None:
        if call_id in self.answered:
            raise InvalidRequest(
                f"{self.where(index)}.call_id: {UNPAIRED}: the function_call '{call_id}' is already answered by "
                f"{self.where(self.answered[call_id])}."
            )
        if call_id not in self.open:
            raise InvalidRequest(
                f"{self.where(index)}.call_id: no function_call step before this result has the id '{call_id}'."
            )
        del self.open[call_id]
        self.answered[call_id] = index

    def _close(self, index: int, kind: object) -> None:
        """Rule 7: a step other than a result (or the end) comes: every call before it must be answered."""
        if not self.open:
            return
        call_id, call = next(iter(self.open.items()))
        after = f"before {self.where(index)} (a {kind} step)" if kind is not None else "after it"
        raise InvalidRequest(
            f"{self.where(call)}: {UNPAIRED}: the function_call '{call_id}' has no function_result step {after}; "
            "answer every call of a reply right after it, before any other step."
        )


def _opened_thought(
    sealer: Sealer, steps: Sequence[Step], index: int, where: Callable[[int], str]
) -> dict[str, object]:
    """Rules 1 and 2 for the thought step at `index`: the payload its signature seals."""
    step = steps[index]
    if step.get("signature") is None:
        raise InvalidRequest(
            f"{where(index)}.signature: a thought step must be replayed with the signature it was issued with."
        )
    payload = sealer.open(step["signature"])
    if (
        payload is None
        or payload.get("kind") != THOUGHT_KIND
        or payload.get("shown") != shown_digest(step.get("summary"))
    ):
        raise InvalidRequest(f"{where(index)}.signature: Thought signature is not valid.")
    following = issued_with(steps, index)
    if not following or following[0]["type"] not in ISSUED_STEPS:
        raise InvalidRequest(
            f"{where(index)}: a thought step must be followed right away by the model_output or function_call "
            "step it was issued with."
        )
    if payload.get("output") != issued_digest(following):
        raise InvalidRequest(
            f"{where(index)}.signature: Thought signature is not valid for {where(index + 1)}: "
            "that step is not the one this thought was issued with."
        )
    return payload

"""An accepted state rebuilt from the conversation's projection: what a resume without the
continuation, and a model switch, start from.

The projection is the conversation as plain facts (turnstate/durable/events.py): each accepted turn's inputs,
its reply's text and tool calls, and the results that answered them. It holds no opaque provider
state, so the state it rebuilds replays none: the adapter's transcript lays each reply out as a past
reply with only its text and calls (`Transcript.projected_reply_items`), and the provider reasons
afresh from there. Rejected replies are not in it: they were never history.

Rules:
1. Each turn is laid out as it is in a live state: its inputs' items, its reply's items, then the
   results of its calls (they join the turn that made them). A last turn whose calls have no result
   yet leaves them unanswered; a last turn whose results no reply has read is unread.
2. The rebuilt history keeps the newest whole turns whose estimated tokens fit the prompt budget
   (the context budget less the output allowance, behind the system prompt), so the first request
   after a resume fits where the run's did; the turns left out are counted, never silently dropped.
   With a compaction by a call of its own, a history at or past the trigger is due for compaction,
   which then keeps its facts in a summary.
3. How the items sit in the payload is the strategy's (`Strategy.rebuild`): every item of every
   turn in `items` with its spans, or, for previous_response_id, no handle and the items unsent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from turnstate.adapters.contract import Item, Transcript
from turnstate.strategies.compaction import HarnessSummary, NativeByCall
from turnstate.strategies.state import RuntimeState, TurnSpan
from turnstate.strategies.strategy import ProjectedTurn, Rebuilt, StrategySettings


@dataclass(frozen=True)
class LaidOut:
    """The projected turns' items (of the kept turns), their spans, and what the last turn awaits."""

    items: list[Item]
    spans: list[TurnSpan]
    dropped_turns: int
    unanswered: tuple[str, ...]
    unread_turn: bool
    compaction_due: bool


def laid_out(settings: StrategySettings, transcript: Transcript, turns: Sequence[ProjectedTurn]) -> LaidOut:
    """Rules 1 and 2: the turns' items, the oldest left out until the rest fits the prompt budget."""
    per_turn = [_turn_items(transcript, turn) for turn in turns]
    budget = settings.max_context_length - settings.max_output_tokens
    estimate = transcript.estimate_tokens([item for items in per_turn for item in items], settings.system_prompt)
    dropped = 0
    while estimate > budget and dropped < len(per_turn) - 1:  # the last turn is the next reply's context
        estimate -= transcript.estimate_tokens(per_turn[dropped])
        dropped += 1
    items: list[Item] = []
    spans: list[TurnSpan] = []
    for turn_items in per_turn[dropped:]:
        spans.append(TurnSpan(start=len(items), end=len(items) + len(turn_items)))
        items += turn_items
    last = turns[-1] if turns else None
    compaction = settings.compaction
    due = isinstance(compaction, NativeByCall | HarnessSummary) and estimate >= compaction.trigger_tokens
    return LaidOut(
        items,
        spans,
        dropped,
        unanswered=tuple(call.id for call in last.tool_calls) if last and not last.results else (),
        unread_turn=bool(last and last.results),
        compaction_due=due and len(spans) > 1,
    )


def _turn_items(transcript: Transcript, turn: ProjectedTurn) -> list[Item]:
    opening = transcript.user_items(turn.inputs) if turn.inputs else []
    results = transcript.tool_result_items(turn.results) if turn.results else []
    return [*opening, *transcript.projected_reply_items(turn.text, turn.tool_calls), *results]


def rebuilt_window(
    settings: StrategySettings, transcript: Transcript, strategy: str, turns: Sequence[ProjectedTurn]
) -> Rebuilt:
    """Rule 3 for the strategies that carry the items: every kept turn in `items`, with its span."""
    laid = laid_out(settings, transcript, turns)
    state = RuntimeState(
        adapter_id=settings.adapter_id,
        strategy=strategy,
        payload={"items": laid.items},
        turns=tuple(laid.spans),
        unanswered=laid.unanswered,
        unread_turn=laid.unread_turn,
    )
    return Rebuilt(state, laid.dropped_turns, laid.compaction_due)

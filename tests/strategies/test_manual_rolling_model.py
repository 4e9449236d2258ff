"""Model-based test of manual_rolling: random walks over its graph, checking the commit discipline
(tests/strategies/commit_discipline.py) and manual_rolling's own rules about its window."""

from __future__ import annotations

from hypothesis.stateful import invariant

from turnstate.adapters.chat_completions import ChatMessages
from turnstate.strategies import manual_rolling
from turnstate.strategies.events import ContextOverflowed
from turnstate.strategies.strategy import StrategySettings

from .commit_discipline import WALK_SETTINGS, CommitDisciplineWalk


class ManualRollingWalk(CommitDisciplineWalk):
    record = manual_rolling.DEFINITION
    strategy_settings = StrategySettings(
        "openai.chat_completions.v1", "Play.", max_retries=2, max_context_length=700, max_output_tokens=100
    )
    transcript = ChatMessages()

    @invariant()
    def the_window_is_whole_turns_that_alternate_and_fit(self) -> None:
        state = self.accepted
        items = state.items
        assert [span.start for span in state.turns] == list(range(0, len(items), 2))
        assert [item["role"] for item in items] == ["user", "assistant"] * (len(items) // 2)
        budget = self.strategy_settings.max_context_length - self.strategy_settings.max_output_tokens
        if len(state.turns) > 1:  # a single turn is kept even if it alone is over the budget
            assert self.transcript.estimate_tokens(items, self.machine.model.system_prompt) <= budget

    @invariant()
    def an_overflow_drops_exactly_the_oldest_whole_turn_sent(self) -> None:
        if isinstance(self.last_event, ContextOverflowed) and not self.machine.is_final:
            sent, resent = self.turn_requests[-2:]
            assert resent.items == sent.items[2:]


ManualRollingWalk.TestCase.settings = WALK_SETTINGS
test_manual_rolling_random_walks = ManualRollingWalk.TestCase

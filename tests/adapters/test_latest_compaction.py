"""Where each transcript finds the latest compaction item: replay keeps it and everything after it,
so the last of several is the one, never an earlier one."""

from __future__ import annotations

import pytest

from turnstate.adapters.anthropic_messages import MessagesItems
from turnstate.adapters.responses import ResponsesItems

RESPONSES = [
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "first"},
    {"role": "user", "content": "frame"},
    {"type": "compaction", "id": "cmp_2", "encrypted_content": "second"},
    {"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "r"},
]
MESSAGES = [
    {"role": "assistant", "content": [{"type": "compaction", "content": "first", "signature": "s1"}]},
    {"role": "user", "content": "frame"},
    {"role": "assistant", "content": [{"type": "compaction", "content": "second", "signature": "s2"}]},
    {"role": "user", "content": "frame"},
]


@pytest.mark.parametrize(("transcript", "items"), [(ResponsesItems(), RESPONSES), (MessagesItems(), MESSAGES)])
def test_the_latest_of_several_compaction_items_is_found(transcript, items):
    assert transcript.latest_compaction(items) == 2
    assert transcript.latest_compaction(items[:2]) == 0
    assert transcript.latest_compaction(items[1:2]) is None

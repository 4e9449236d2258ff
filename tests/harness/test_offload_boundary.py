"""The stale tool-result offload at its exact boundaries, from the profile's setting to the request
the provider is sent (issue 30). strategies/offload.py's rules 1 and 3: a result is stale once
`keep_recent_per_tool` newer results of its tool follow it, and a stale result becomes its pointer
unless the pointer would shorten it by fewer than `min_savings_chars` characters; the smallest
settings a profile takes are 1 and 0. Each case sets the profile, plays tool rounds through the real
SDK and the local provider, and reads the last request as the run recorded it."""

from __future__ import annotations

from itertools import count

import pytest

from turnstate import DEFAULT_PROFILE, Session, load_profile
from turnstate.durable.artifacts import sent_messages
from turnstate.durable.layout import TOOL_RESULTS
from turnstate.environments import make_environment
from turnstate.strategies.offload import pointer, ref_of

from .test_run import with_changes
from .test_session_tools import ASK, LOOKUP, answer

GAME = make_environment("beacon_grid", 1)
HEAD = "page one: "


def result_saving(saving: int) -> str:
    """A lookup result whose pointer is exactly `saving` characters shorter than it (negative: longer)."""
    size = next(
        size for size in count(len(HEAD)) if size - len(pointer(LOOKUP.name, ref_of(""), size)) == saving
    )  # every ref has the same length
    return HEAD + "x" * (size - len(HEAD))


# (keep_recent_per_tool, min_savings_chars, the first result's saving, lookup results after it, offloaded)
# fmt: off
CASES = {
    "a saving of exactly the floor is offloaded":        (1, 500, 500, 1, True),
    "a saving one character short of it stays inline":   (1, 500, 499, 1, False),
    "with a floor of 0, a pointer as long as the result replaces it": (1, 0, 0, 1, True),
    "with a floor of 0, a result shorter than its pointer stays":     (1, 0, -1, 1, False),
    "a result with keep_recent newer results is stale":  (2, 500, 500, 2, True),
    "one with a newer result fewer stays inline":        (2, 500, 500, 1, False),
}
# fmt: on


@pytest.mark.parametrize(("keep", "floor", "saving", "newer", "offloaded"), CASES.values(), ids=CASES.keys())
def test_a_stale_result_goes_out_as_its_pointer_exactly_from_the_profiles_boundary_on(
    tmp_path, clock, keep, floor, saving, newer, offloaded
):
    offload = {"keep_recent_per_tool": keep, "min_savings_chars": floor}
    profile = with_changes(load_profile(DEFAULT_PROFILE), runtime={"tool_result_offload": offload})
    text = result_saving(saving)
    with Session(profile, actions=GAME.actions, tools=(LOOKUP,), out_dir=tmp_path, sleep=clock.sleep) as session:
        turn = session.observe(f"{GAME.reset().text}\n\n{ASK}")
        session.accept()
        for result in [text, *(f"page {number}: nothing" for number in range(2, newer + 2))]:
            turn = session.observe(ASK, results=answer(turn, result))
            session.accept()
        run_dir = session.run_dir
    sent = [message["content"] for message in sent_messages(run_dir, session.steps)]
    shown = pointer(LOOKUP.name, ref_of(text), len(text))
    assert (shown in sent, text in sent) == (offloaded, not offloaded)
    assert (run_dir / TOOL_RESULTS / f"{ref_of(text)}.txt").is_file() is offloaded  # stored before it was sent

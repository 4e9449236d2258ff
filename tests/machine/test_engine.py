"""The engine: structural validation, firing, refusing, recording, and nested composition."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest

from turnstate.machine import engine
from turnstate.machine.engine import (
    Done,
    Event,
    InvalidEvent,
    LiveMachine,
    MachineModel,
    MachineSpec,
    NoTransition,
    SpecError,
    path_of,
    validate_spec,
)
from turnstate.machine.engine import (
    Transition as T,
)


class Door(enum.Enum):
    Closed = "closed"
    Open = "open"
    Broken = "broken for good"


@dataclass(frozen=True)
class Pushed(Event):
    strength: int


@dataclass(frozen=True)
class Pulled(Event):
    pass


@dataclass(frozen=True)
class Opened(Event):
    pass


@dataclass(frozen=True)
class Went(Event):
    pass


@dataclass(frozen=True)
class Fell(Event):
    pass


class DoorModel(MachineModel):
    def is_strong(self, event: Pushed) -> bool:
        return event.strength > 5

    def is_gentle(self, event: Pushed) -> bool:
        return event.strength <= 1

    def note_open(self, event: Event) -> None:
        self.emit(("opened", event))


DOOR = MachineSpec(
    name="door",
    states=Door,
    initial=Door.Closed,
    final=frozenset({Door.Broken}),
    transitions=(
        T(Pushed, Door.Closed, Door.Open, guards=("is_gentle",), actions=("note_open",)),
        T(Pushed, Door.Closed, Door.Broken, guards=("is_strong",)),
        T(Pulled, Door.Open, Door.Closed),
    ),
)


def test_a_fired_event_moves_the_state_and_returns_the_actions_effects():
    machine = LiveMachine(DOOR, DoorModel())
    effects = machine.fire(Pushed(1))
    assert machine.state is Door.Open
    assert effects == [("opened", Pushed(1))]
    assert [(f.source, f.trigger, f.dest) for f in machine.fired] == [("Closed", "Pushed", "Open")]


def test_a_fired_transition_names_the_row_that_took_it():
    machine = LiveMachine(DOOR, DoorModel())
    machine.fire(Pushed(1))
    machine.fire(Pulled())
    rows = list(DOOR.rows())
    assert [f.row for f in machine.fired] == [rows[0], rows[2]]
    strong = LiveMachine(DOOR, DoorModel())
    strong.fire(Pushed(9))
    assert strong.fired[-1].row == rows[1]


def test_taking_what_fired_hands_it_over_once_so_a_long_run_keeps_no_history():
    machine = LiveMachine(DOOR, DoorModel())
    machine.fire(Pushed(1))
    taken = machine.take_fired()
    machine.fire(Pulled())
    assert [(f.source, f.trigger, f.dest) for f in taken] == [("Closed", "Pushed", "Open")]
    assert [(f.source, f.trigger, f.dest) for f in machine.take_fired()] == [("Open", "Pulled", "Closed")]
    assert machine.fired == [] and machine.take_fired() == []


def test_an_event_the_state_does_not_accept_raises_and_changes_nothing():
    machine = LiveMachine(DOOR, DoorModel())
    with pytest.raises(InvalidEvent, match="Pulled.*not accepted in state Closed"):
        machine.fire(Pulled())
    assert machine.state is Door.Closed
    assert machine.fired == []


def test_when_every_guard_refuses_the_machine_raises_and_changes_nothing():
    machine = LiveMachine(DOOR, DoorModel())
    with pytest.raises(NoTransition, match="every guard refused"):
        machine.fire(Pushed(3))
    assert machine.state is Door.Closed


def test_a_final_state_accepts_nothing():
    machine = LiveMachine(DOOR, DoorModel())
    machine.fire(Pushed(9))
    assert machine.is_final
    with pytest.raises(InvalidEvent):
        machine.fire(Pushed(1))


def test_listeners_see_every_fired_transition():
    seen = []

    def listener(fired: engine.Fired) -> None:
        seen.append(fired)

    engine.add_listener(listener)
    try:
        LiveMachine(DOOR, DoorModel()).fire(Pushed(0))
    finally:
        engine.remove_listener(listener)
    assert seen == [engine.Fired("door", "Closed", "Pushed", "Open", row=next(DOOR.rows()))]


class Loop(enum.Enum):
    Start = "start"
    Middle = "middle"
    Island = "unreachable"
    Pit = "a trap"
    End = "end"


@pytest.mark.parametrize(
    ("rows", "final", "problem"),
    [
        ((T(Went, Loop.Start, Loop.End),), {Loop.End}, "state Middle is unreachable"),
        (
            (T(Went, Loop.Start, Loop.Middle), T(Fell, Loop.Middle, Loop.Pit), T(Opened, Loop.Middle, Loop.End)),
            {Loop.End},
            "state Pit is a trap",
        ),
        (
            (T(Went, Loop.Start, Loop.End), T(Went, Loop.Start, Loop.Middle, guards=("g",))),
            {Loop.End},
            r"in state Start the row 'Went' -> Middle never fires: the row above it \(unguarded\) -> End",
        ),
        (
            (
                T(Went, Loop.Start, Loop.End, guards=("g",)),
                T(Went, Loop.Start, Loop.Middle, guards=("g", "h")),
                T(Went, Loop.Start, Loop.Middle),
            ),
            {Loop.End},
            r"the row 'Went' -> Middle never fires: the row above it \[g\] -> End takes every event it would",
        ),
        ((T(Went, Loop.Start, Loop.End), T(Pulled, Loop.End, Loop.Start)), {Loop.End}, "final state End has outgoing"),
        ((T(Went, Loop.Start, Loop.End), T(Went, Loop.Start, Loop.End)), {Loop.End}, "declared twice"),
        ((T(Went, Loop.Start, Door.Open),), {Loop.End}, "names <Door.Open: 'open'>, which is not one of its states"),
        ((T("go", Loop.Start, Loop.End),), {Loop.End}, "row 'go' -> End is not keyed by an Event class"),
    ],
)
def test_structural_defects_are_named(rows, final, problem):
    spec = MachineSpec("loop", Loop, Loop.Start, frozenset(final), rows)
    with pytest.raises(SpecError, match=problem):
        validate_spec(spec)


class Split(enum.Enum):
    Start = "start"
    Failed_Closed = "a name holding the nesting separator"


def test_a_state_name_holding_the_nesting_separator_is_refused():
    spec = MachineSpec(
        "split", Split, Split.Start, frozenset({Split.Failed_Closed}), (T(Went, Split.Start, Split.Failed_Closed),)
    )
    assert list(spec.rows())  # the table itself is sound
    with pytest.raises(SpecError, match="state name 'Failed_Closed' contains the nesting separator '_'"):
        validate_spec(spec)


def test_accepts_tells_which_events_the_current_state_takes_nested_states_included():
    machine = LiveMachine(OUTER, LatchModel())
    assert machine.accepts(Pulled) and not machine.accepts(Pushed)
    machine.fire(Pulled())
    assert machine.accepts(Pushed)  # a row of the nested machine
    assert machine.accepts(Fell)  # the parent's row out of the compound state, from any state inside it
    assert not machine.accepts(Opened)


def test_a_guard_or_action_that_does_not_resolve_is_named():
    spec = MachineSpec(
        "door",
        Door,
        Door.Closed,
        frozenset({Door.Broken}),
        (
            T(Pushed, Door.Closed, Door.Broken, actions=("smash",)),
            T(Pulled, Door.Open, Door.Closed),
        ),
    )
    with pytest.raises(SpecError, match="'smash' does not resolve on DoorModel"):
        LiveMachine(spec, DoorModel())


class Latch(enum.Enum):
    Shut = "shut"
    Ajar = "ajar, which finishes the latch"


LATCH = MachineSpec(
    name="latch",
    states=Latch,
    initial=Latch.Shut,
    final=frozenset({Latch.Ajar}),
    transitions=(T(Pushed, Latch.Shut, Latch.Ajar, guards=("is_gentle",), actions=("note_open",)),),
    entry=("note_entered",),
)


class Outer(enum.Enum):
    Idle = "idle"
    Busy = "busy, with a nested latch machine inside"
    Finished = "finished"


class LatchModel(DoorModel):
    def note_entered(self, event: Event) -> None:
        self.emit(("entered", event))

    def note_done(self, event: Done) -> None:
        self.emit(("done", event))


OUTER = MachineSpec(
    name="outer",
    states=Outer,
    initial=Outer.Idle,
    final=frozenset({Outer.Finished}),
    transitions=(
        T(Pulled, Outer.Idle, Outer.Busy, actions=("note_open",)),
        T(Done, Outer.Busy, Outer.Idle, actions=("note_done",)),
        T(Fell, Outer.Busy, Outer.Finished),
    ),
    nested={Outer.Busy: LATCH},
)


def test_entering_a_nested_machine_runs_its_entry_actions_after_the_rows_own():
    machine = LiveMachine(OUTER, LatchModel())
    assert machine.fire(Pulled()) == [("opened", Pulled()), ("entered", Pulled())]
    assert machine.path == path_of(Outer.Busy, Latch.Shut)


def test_a_nested_machine_that_reaches_a_final_state_fires_done_at_its_parent_in_the_same_fire():
    machine = LiveMachine(OUTER, LatchModel())
    machine.fire(Pulled())
    effects = machine.fire(Pushed(0))
    assert effects == [("opened", Pushed(0)), ("done", Done(cause=Pushed(0)))]
    assert machine.path == "Idle"
    assert [(f.source, f.trigger, f.dest) for f in machine.fired[-2:]] == [
        ("Busy_Shut", "Pushed", "Busy_Ajar"),
        ("Busy_Ajar", "Done", "Idle"),
    ]


def test_a_row_out_of_a_compound_state_is_one_row_whichever_nested_state_it_fired_from():
    fell = next(row for row in OUTER.rows() if row.trigger == "Fell")
    assert fell.sources == ("Busy",)
    machine = LiveMachine(OUTER, LatchModel())
    machine.fire(Pulled())
    machine.fire(Fell())
    assert (machine.fired[-1].source, machine.fired[-1].row) == ("Busy_Shut", fell)
    assert machine.path == "Finished"


def test_a_row_of_several_sources_is_one_row_whichever_it_fired_from():
    spec = MachineSpec(
        "either",
        Loop,
        Loop.Start,
        frozenset({Loop.End}),
        (T(Went, Loop.Start, Loop.Middle), T(Went, Loop.Middle, Loop.Pit), T(Fell, (Loop.Middle, Loop.Pit), Loop.End)),
        omitted=frozenset({Loop.Island}),
    )
    rows = []
    for steps in ([Went()], [Went(), Went()]):
        machine = LiveMachine(spec, DoorModel())
        for event in (*steps, Fell()):
            machine.fire(event)
        rows.append(machine.fired[-1].row)
    assert rows[0] == rows[1] == list(spec.rows())[2]


@pytest.mark.parametrize(
    ("nested_final", "rows", "problem"),
    [
        (
            frozenset(),
            (T(Pulled, Outer.Idle, Outer.Busy),),
            "the machine nested in Busy \\(latch\\) declares no final state",
        ),
        (frozenset({Latch.Ajar}), (T(Pulled, Outer.Idle, Outer.Busy),), "no row leaves Busy on Done"),
        (
            frozenset({Latch.Ajar}),
            (T(Pulled, Outer.Idle, Outer.Busy), T(Done, Outer.Busy, Outer.Finished), T(Done, Outer.Idle, Outer.Busy)),
            "a Done row must leave one state that holds a nested machine",
        ),
    ],
)
def test_a_nested_machine_must_finish_and_its_parent_must_go_on(nested_final, rows, problem):
    latch = MachineSpec("latch", Latch, Latch.Shut, nested_final, LATCH.transitions)
    spec = MachineSpec("outer", Outer, Outer.Idle, frozenset({Outer.Finished}), rows, nested={Outer.Busy: latch})
    with pytest.raises(SpecError, match=problem):
        validate_spec(spec)


def test_a_nested_machine_composes_without_being_copied():
    validate_spec(OUTER)
    assert [row.sources for row in OUTER.rows()][0] == ("Busy_Shut",)  # the nested table's row, placed
    assert OUTER.transitions[1:] == tuple(row.transition for row in OUTER.rows())[2:]


class Wrapper(enum.Enum):
    Busy = "busy from the start"
    Finished = "finished"


STARTS_NESTED = MachineSpec(
    name="starts_nested",
    states=Wrapper,
    initial=Wrapper.Busy,
    final=frozenset({Wrapper.Finished}),
    transitions=(T(Done, Wrapper.Busy, Wrapper.Finished),),
    nested={Wrapper.Busy: LATCH},
)


def test_a_nested_machine_is_drawn_as_a_cluster_inside_its_parent():
    from turnstate.machine.diagrams import to_dot

    dot = to_dot(OUTER)
    assert "subgraph cluster_Busy" in dot
    # a row into the parent ends at the cluster's border, laid out to the nested machine's initial dot
    assert 'Idle -> "Busy/latch/__start__" [label="Pulled /\\l    note_open\\l" lhead=cluster_Busy]' in dot
    validate_spec(STARTS_NESTED)
    # so does the initial marker
    assert '__start__ -> "Busy/latch/__start__" [lhead=cluster_Busy]' in to_dot(STARTS_NESTED)


def test_every_declared_machine_is_structurally_sound_and_its_names_resolve():
    from turnstate.strategies import STRATEGIES

    for strategy in STRATEGIES.values():
        for spec in strategy.specs.values():
            validate_spec(spec, strategy.model)  # raises SpecError naming any defect
            assert spec.initial in spec.members() and spec.final

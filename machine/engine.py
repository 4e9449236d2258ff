"""The machine engine: declarative tables built into `transitions` machines.

A strategy declares its machine as data (a `MachineSpec`: a `State` enum, an initial state, the final
states and a literal table of `Transition` rows). Guards and actions are referenced by name and
resolved on the model object passed to `build`, so a test can swap the implementation and the diagram
can print the names. The engine:

- validates the structure before anything runs (see `validate_spec`): one initial state, every state
  reachable, no trap states, no row that a row above it always shadows, final states are dead ends;
- nests machines as the statechart anchors do (XState's compound states with `final` and `onDone`,
  SCXML's `done.state`): a state may hold a nested machine, which is entered in its initial state
  (running the nested machine's `entry` actions) and decides first; a row whose source is the
  compound state applies from any state inside it, as the fallback when the nested machine has no
  row for the event or all its guards refuse; when the nested machine reaches one of its final
  states the engine fires `Done` at once, and the parent's row on `Done` from the compound state
  moves on. No table names a state of another table;
- builds a `transitions` machine (hierarchical only when something is nested) with auto_transitions
  off;
- fires events: an event is a frozen dataclass, and a row is keyed by the event's class (as h11 keys
  its table by event type), so a misspelt trigger is a NameError at import, not a silent dead row; an
  event the current state does not accept raises `InvalidEvent` and changes nothing; if every guarded
  row refuses, the machine raises `NoTransition` and changes nothing;
- records every fired (machine, source, trigger, dest) with the `Row` that fired, for artifacts and
  the coverage gate.

Within one table and one source, rows are tried top to bottom and the first whose guards all pass
fires (SCXML's document order); `validate_spec` refuses a row that a row above it always shadows.

Actions emit effects (call the provider, submit an action, ...) into the model; `fire` hands them to
the caller, which performs the I/O and feeds the outcome back as the next event. No callback here
performs I/O, because `transitions` cannot roll back a state change when a callback raises.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, Generic, TypeVar

from transitions import Machine, MachineError
from transitions.extensions import HierarchicalMachine

SEPARATOR = "_"  # transitions' separator between a parent state and a nested state; no state name may hold it


class SpecError(ValueError):
    """A machine table is structurally wrong; raised when it is validated or built."""


class InvalidEvent(RuntimeError):
    """The current state does not accept this event. The state is unchanged."""


class NoTransition(RuntimeError):
    """The state accepts the event but every guarded row refused it. The state is unchanged."""


@dataclass(frozen=True)
class Event:
    """Base of all events: frozen dataclasses named as facts. The class name is the trigger."""


@dataclass(frozen=True)
class Done(Event):
    """A nested machine reached one of its final states; the engine fires this at its parent at once.
    `cause` is the event that ended the nested machine."""

    cause: Event


@dataclass(frozen=True)
class Effect:
    """Base of all effects: something a machine asks the runner to do."""


@dataclass(frozen=True)
class Transition:
    """One row of a machine table, keyed by the event class that fires it. `source` and `dest` are
    states of the table's own enum; a row may leave several states alike (a tuple of sources)."""

    event: type[Event]
    source: enum.Enum | tuple[enum.Enum, ...]
    dest: enum.Enum
    guards: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()

    @property
    def trigger(self) -> str:
        """The name the row is drawn, recorded and covered under: its event class's name."""
        return self.event.__name__

    @property
    def sources(self) -> tuple[enum.Enum, ...]:
        return self.source if isinstance(self.source, tuple) else (self.source,)


def when(condition: bool, *rows: Transition) -> tuple[Transition, ...]:
    """The rows a table holds only in some configurations (e.g. only with a compaction by a call)."""
    return rows if condition else ()


@dataclass(frozen=True)
class Row:
    """A table row as it sits in an assembled machine: `table` is the path of the state whose nested
    table holds it ("" for the top table). The same row in two configurations of a machine is the same
    `Row`, which is what the coverage gate counts."""

    table: str
    transition: Transition

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(_path(self.table, state) for state in self.transition.sources)

    @property
    def dest(self) -> str:
        return _path(self.table, self.transition.dest)

    @property
    def trigger(self) -> str:
        return self.transition.trigger


def _path(table: str, state: enum.Enum) -> str:
    return f"{table}{SEPARATOR}{state.name}" if table else state.name


def path_of(*states: enum.Enum) -> str:
    """The path of a nested state, outermost first: path_of(Outer.Busy, Inner.Shut) is "Busy_Shut"."""
    return SEPARATOR.join(state.name for state in states)


@dataclass(frozen=True)
class MachineSpec:
    """A machine as data: what is drawn, validated, covered and run. `omitted` are states of the enum
    this configuration of the machine does not have (and no row of it names); `entry` are the actions
    run whenever the machine is entered as a nested machine."""

    name: str
    states: type[enum.Enum]
    initial: enum.Enum
    final: frozenset[enum.Enum]
    transitions: tuple[Transition, ...]
    nested: Mapping[enum.Enum, MachineSpec] = field(default_factory=dict)
    entry: tuple[str, ...] = ()
    omitted: frozenset[enum.Enum] = frozenset()

    def members(self) -> list[enum.Enum]:
        """The states this machine has, in declaration order."""
        return [state for state in self.states if state not in self.omitted]

    def state_paths(self, prefix: str = "") -> list[str]:
        """Every state's full path, nested states included, in declaration order."""
        paths = []
        for state in self.members():
            path = _path(prefix, state)
            paths.append(path)
            if state in self.nested:
                paths.extend(self.nested[state].state_paths(path))
        return paths

    def rows(self, table: str = "") -> Iterator[Row]:
        """Every row, placed. A nested machine's rows come before its parent's: the state inside
        decides first, and a parent's row from the compound state is the fallback."""
        for state, child in self.nested.items():
            yield from child.rows(_path(table, state))
        for transition in self.transitions:
            yield Row(table, transition)

    def find(self, path: str) -> tuple[MachineSpec, enum.Enum]:
        """The machine whose table holds the state at `path`, and the state."""
        spec, parts = self, path.split(SEPARATOR)
        for part in parts[:-1]:
            spec = spec.nested[spec.states[part]]
        return spec, spec.states[parts[-1]]

    def is_compound(self, path: str) -> bool:
        spec, state = self.find(path)
        return state in spec.nested

    def landing(self, path: str) -> str:
        """The state a row to `path` lands in: `path` itself, or for a compound state its nested
        initial state (recursively)."""
        while self.is_compound(path):
            spec, state = self.find(path)
            path = _path(path, spec.nested[state].initial)
        return path

    def entry_actions(self, path: str) -> tuple[str, ...]:
        """The nested machines' entry actions a row into `path` runs after its own, outermost first."""
        actions: tuple[str, ...] = ()
        while self.is_compound(path):
            spec, state = self.find(path)
            child = spec.nested[state]
            actions += child.entry
            path = _path(path, child.initial)
        return actions

    def leaves(self, path: str) -> list[str]:
        """The states a machine can rest in at or under `path`."""
        if not self.is_compound(path):
            return [path]
        return [leaf for leaf in self.state_paths() if leaf.startswith(path + SEPARATOR) and not self.is_compound(leaf)]

    @cached_property
    def nested_finals(self) -> frozenset[str]:
        """The paths of the nested machines' final states: reaching one fires `Done` at the parent."""
        finals: set[str] = set()
        for parent in self.state_paths():
            table, state = self.find(parent)
            if state in table.nested:
                finals.update(_path(parent, final) for final in table.nested[state].final)
        return frozenset(finals)

    def log_keys(self, row: Row, source: str | None = None) -> set[tuple[str, str, str]]:
        """The (source, trigger, dest) records the transition log writes when `row` fires (from
        `source` alone, when given): the state it left, whichever inside a compound source, and the
        state it landed in."""
        landing = self.landing(row.dest)
        sources = row.sources if source is None else (source,)
        return {(leaf, row.trigger, landing) for each in sources for leaf in self.leaves(each)}

    def guard_and_action_names(self) -> set[str]:
        names = {name for row in self.rows() for name in (*row.transition.guards, *row.transition.actions)}
        return names | {name for path in self.state_paths() for name in self.entry_actions(path)}


def validate_spec(spec: MachineSpec, model: object | None = None) -> None:
    """Raise SpecError naming every structural defect; with a model (an instance or its class),
    check that every named guard and action resolves on it too."""
    problems = list(_structural_problems(spec))
    if model is not None:
        model_name = model.__name__ if isinstance(model, type) else type(model).__name__
        problems += [
            f"{spec.name}: guard or action {name!r} does not resolve on {model_name}"
            for name in sorted(spec.guard_and_action_names())
            if not callable(getattr(model, name, None))
        ]
    if problems:
        raise SpecError("; ".join(problems))


def _structural_problems(spec: MachineSpec) -> Iterator[str]:
    where = spec.name
    table_problems = list(_table_problems(spec, where))
    yield from table_problems
    if table_problems:  # the graph below would read the same defects as unknown paths
        return
    known = set(spec.state_paths())
    edges: dict[str, set[str]] = {path: set() for path in known}
    for row in spec.rows():
        if not all(path in known for path in (*row.sources, row.dest)):
            continue  # named by _table_problems
        leaves = [leaf for source in row.sources for leaf in spec.leaves(source)]
        if row.transition.event is Done:
            leaves = [leaf for leaf in leaves if leaf in spec.nested_finals]
        for leaf in leaves:
            edges[leaf].add(spec.landing(row.dest))
    start = spec.landing(spec.initial.name)
    reachable = _closure(edges, [start])
    resting = {state.name for state in spec.final} | {start}
    for path in spec.state_paths():
        if spec.is_compound(path):
            continue
        if path not in reachable:
            yield f"{where}: state {path} is unreachable from {spec.initial.name}"
        elif path not in resting and not _closure(edges, [path]) & resting:
            yield f"{where}: state {path} is a trap (it can reach neither {spec.initial.name} nor a final state)"


def _table_problems(spec: MachineSpec, where: str, table: str = "") -> Iterator[str]:
    """What is wrong in one table (and, recursively, in its nested ones), named by table."""
    if table:
        where = f"{where} (in {table})"
    members = set(spec.members())
    if spec.initial not in members:
        yield f"{where}: initial state {spec.initial!r} is not one of its states"
    for state in spec.final:
        if state not in members:
            yield f"{where}: final state {state!r} is not one of its states"
        if state in spec.nested:
            yield f"{where}: final state {state.name} holds a nested machine"
    for state in members:
        if SEPARATOR in state.name:
            yield f"{where}: state name {state.name!r} contains the nesting separator {SEPARATOR!r}; rename it"
    seen: dict[tuple[enum.Enum, type[Event]], list[Transition]] = {}
    declared: set[tuple[enum.Enum, str, enum.Enum, tuple[str, ...]]] = set()
    for row in spec.transitions:
        if not (isinstance(row.event, type) and issubclass(row.event, Event)):
            yield f"{where}: row {row.event!r} -> {getattr(row.dest, 'name', row.dest)} is not keyed by an Event class"
            continue
        for state in (*row.sources, row.dest):
            if not isinstance(state, spec.states) or state not in members:
                yield f"{where}: row {row.trigger!r} names {state!r}, which is not one of its states"
        for source in row.sources:
            if source in spec.final:
                yield f"{where}: final state {source.name} has outgoing transitions"
            key = (source, row.trigger, row.dest, row.guards)
            if key in declared:
                yield f"{where}: row ({source.name}, {row.trigger}, {row.dest.name}) is declared twice"
            declared.add(key)
            above = seen.setdefault((source, row.event), [])
            for higher in above:
                if set(higher.guards) <= set(row.guards):
                    shown = f"[{' & '.join(higher.guards)}]" if higher.guards else "(unguarded)"
                    yield (
                        f"{where}: in state {source.name} the row {row.trigger!r} -> {row.dest.name} never fires: "
                        f"the row above it {shown} -> {higher.dest.name} takes every event it would; "
                        "put it above that row, or drop it"
                    )
                    break
            above.append(row)
        if row.event is Done and not (len(row.sources) == 1 and row.source in spec.nested):
            yield f"{where}: a Done row must leave one state that holds a nested machine, not {row.source!r}"
    for state, child in spec.nested.items():
        if not child.final:
            yield f"{where}: the machine nested in {state.name} ({child.name}) declares no final state"
        elif not any(row.event is Done and row.source is state for row in spec.transitions):
            yield f"{where}: no row leaves {state.name} on Done, so {child.name} finishing leads nowhere"
        yield from _table_problems(child, spec.name, _path(table, state))


def _closure(edges: Mapping[str, set[str]], start: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    queue = deque(start)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        queue.extend(edges.get(node, ()))
    return seen


Listener = Callable[["Fired"], None]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Observe every fired transition of every machine (used by the test-session coverage gate)."""
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    _listeners.remove(listener)


@dataclass(frozen=True, slots=True)
class Fired:
    """One fired transition, as recorded in artifacts, and the row of the table that fired it (so
    rows that share a source, trigger and dest stay apart)."""

    machine: str
    source: str
    trigger: str
    dest: str
    row: Row

    def as_log(self) -> dict[str, str]:
        """As the transition log records it (what dataclasses.asdict gives, without the row or its deep copy)."""
        return {"machine": self.machine, "source": self.source, "trigger": self.trigger, "dest": self.dest}


class MachineModel:
    """Base for strategy objects: the model `transitions` drives. Actions call `emit`."""

    # Both set by transitions when the machine is built: the current state's path, and the method
    # that fires a trigger by name and says whether the state moved.
    state: str
    trigger: Callable[..., bool]

    def __init__(self) -> None:
        self._effects: list[Effect] = []

    def emit(self, effect: Effect) -> None:
        self._effects.append(effect)

    def _take_effects(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects


ModelT = TypeVar("ModelT", bound=MachineModel)


class LiveMachine(Generic[ModelT]):
    """A spec built around a model: fire events, read the state, collect what fired."""

    def __init__(self, spec: MachineSpec, model: ModelT, at: str | None = None) -> None:
        """Start in the spec's initial state, or `at` (a state path): where a resumed run's machine
        was when its last checkpoint was taken."""
        validate_spec(spec, model)
        if at is not None and (at not in spec.state_paths() or spec.is_compound(at)):
            raise ValueError(f"{spec.name} has no state {at!r} to start in")
        self.spec = spec
        self.model = model
        self.fired: list[Fired] = []
        self._row: Row | None = None  # the row the event being fired took, noted once its guards let it through
        self._finals = spec.nested_finals
        # A flat table needs none of the hierarchical machine's work per event (a third of a fire).
        machine_class = HierarchicalMachine if spec.nested else Machine
        machine_class(
            model=model,
            states=_hsm_states(spec),
            initial=at or spec.initial.name,
            transitions=[
                {
                    "trigger": row.trigger,
                    "source": list(row.sources),
                    "dest": row.dest,
                    "conditions": list(row.transition.guards),
                    "before": [partial(self._take_row, row)],
                    "after": [*row.transition.actions, *spec.entry_actions(row.dest)],
                }
                for row in spec.rows()
            ],
            auto_transitions=False,
            ignore_invalid_triggers=False,
        )

    @property
    def path(self) -> str:
        """The full current state path, e.g. "Accepted" or "Compacting_Requesting"."""
        return self.model.state

    @property
    def state(self) -> enum.Enum:
        """The current top-level state as a member of the spec's enum."""
        return self.spec.states[self.path.split(SEPARATOR, 1)[0]]

    @property
    def is_final(self) -> bool:
        return self.path in {state.name for state in self.spec.final}

    def accepts(self, event_type: type[Event]) -> bool:
        """Whether some row leaves the current state (or a state it is nested in) on `event_type`."""
        path = self.path
        return any(
            row.transition.event is event_type
            and any(path == source or path.startswith(source + SEPARATOR) for source in row.sources)
            for row in self.spec.rows()
        )

    def fire(self, event: Event) -> list[Any]:
        """Feed one event (and `Done` to the parent of each nested machine it finishes); return the
        effects their actions emitted."""
        self._take(event)
        while self._finals and self.model.state in self._finals:
            self._take(Done(cause=event))
        return self.model._take_effects()

    def _take(self, event: Event) -> None:
        source = self.path
        trigger = type(event).__name__
        try:
            moved = self.model.trigger(trigger, event)
        except MachineError as error:
            raise InvalidEvent(f"{self.spec.name}: event {trigger} is not accepted in state {source}") from error
        if not moved or self._row is None:
            raise NoTransition(f"{self.spec.name}: every guard refused event {trigger} in state {source}")
        fired = Fired(self.spec.name, source, trigger, self.path, self._row)
        self._row = None
        self.fired.append(fired)
        for listener in _listeners:
            listener(fired)

    def _take_row(self, row: Row, event: Event) -> None:
        self._row = row

    def take_fired(self) -> list[Fired]:
        """What fired since the last take, handed over and forgotten here: a long run's driver takes
        each turn's transitions, so the machine keeps no history that grows with the run."""
        taken, self.fired = self.fired, []
        return taken


def _hsm_states(spec: MachineSpec) -> list[Any]:
    states: list[Any] = []
    for state in spec.members():
        if state in spec.nested:
            child = spec.nested[state]
            states.append({"name": state.name, "children": _hsm_states(child), "initial": child.initial.name})
        else:
            states.append(state.name)
    return states

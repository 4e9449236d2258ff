"""The machine engine: declarative tables built into `transitions` machines.

A strategy declares its machine as data (a `MachineSpec`: a `State` enum, an initial state, the final
states and a literal table of `Transition` rows). Guards and actions are referenced by name and
resolved on the model object passed to `build`, so a test can swap the implementation and the diagram
can print the names. The engine:

- validates the structure before anything runs (see `validate_spec`): one initial state, every state
  reachable, no trap states, no dead rows, final states are dead ends by design;
- builds a `transitions` HierarchicalMachine with auto_transitions off, so nested machines (a
  compaction machine inside a conversation machine) compose without being copied;
- fires events: an event is a frozen dataclass, and a row is keyed by the event's class (as h11 keys
  its table by event type), so a misspelt trigger is a NameError at import, not a silent dead row; an
  event the current state does not accept raises `InvalidEvent` and changes nothing; if every guarded
  row refuses, the machine raises `NoTransition` and changes nothing;
- records every fired (machine, source, trigger, dest) for artifacts and the coverage gate.

Actions emit effects (call the provider, submit an action, ...) into the model; `fire` hands them to
the caller, which performs the I/O and feeds the outcome back as the next event. No callback here
performs I/O, because `transitions` cannot roll back a state change when a callback raises.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
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
class Effect:
    """Base of all effects: something a machine asks the runner to do."""


@dataclass(frozen=True)
class Transition:
    """One row of a machine table, keyed by the event class that fires it. `source` and `dest` are
    states of the table's own enum, or a nested state's path such as "Compacting_Requesting" when the
    row leaves a nested machine."""

    event: type[Event]
    source: enum.Enum | str
    dest: enum.Enum | str
    guards: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()

    @property
    def trigger(self) -> str:
        """The name the row is drawn, recorded and covered under: its event class's name."""
        return self.event.__name__

    @property
    def source_name(self) -> str:
        return _state_name(self.source)

    @property
    def dest_name(self) -> str:
        return _state_name(self.dest)


@dataclass(frozen=True)
class MachineSpec:
    """A machine as data: what is drawn, validated, covered and run."""

    name: str
    states: type[enum.Enum]
    initial: enum.Enum
    final: frozenset[enum.Enum]
    transitions: tuple[Transition, ...]
    nested: Mapping[enum.Enum, MachineSpec] = field(default_factory=dict)

    def state_paths(self, prefix: str = "") -> list[str]:
        """Every state's full path, nested states included, in declaration order."""
        paths = []
        for state in self.states:
            path = prefix + state.name
            paths.append(path)
            if state in self.nested:
                paths.extend(self.nested[state].state_paths(path + SEPARATOR))
        return paths

    def rows(self, prefix: str = "") -> Iterator[tuple[str, str, Transition]]:
        """Every row with its full source and dest paths. A nested machine's rows come before its
        parent's: the state inside decides first, and a parent's row is the fallback for an event
        the nested machine leaves unhandled (its guards all refuse, or it has no row for it)."""
        for state, child in self.nested.items():
            yield from child.rows(prefix + state.name + SEPARATOR)
        for row in self.transitions:
            yield prefix + row.source_name, prefix + row.dest_name, row

    def declared(self) -> list[tuple[str, str, str]]:
        """The (source, trigger, dest) triples the coverage gate expects to see fired; a row into a
        parent state lands in its nested initial state, as it fires."""
        return [(source, row.trigger, self.landing(dest)) for source, dest, row in self.rows()]

    def landing(self, path: str) -> str:
        """The state a row to `path` lands in: `path` itself, or for a parent of a nested machine its
        nested initial state (recursively)."""
        current = self
        for part in path.split(SEPARATOR):
            state = current.states[part]
            if state not in current.nested:
                return path
            current = current.nested[state]
        while current.initial in current.nested:
            path += SEPARATOR + current.initial.name
            current = current.nested[current.initial]
        return path + SEPARATOR + current.initial.name

    def guard_and_action_names(self) -> set[str]:
        return {name for _, _, row in self.rows() for name in (*row.guards, *row.actions)}


def _state_name(state: enum.Enum | str) -> str:
    return state.name if isinstance(state, enum.Enum) else state


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


def _structural_problems(spec: MachineSpec, prefix: str = "") -> Iterator[str]:
    where = f"{spec.name}"
    if spec.initial not in spec.states:
        yield f"{where}: initial state {spec.initial!r} is not one of its states"
    for state in spec.final:
        if state not in spec.states:
            yield f"{where}: final state {state!r} is not one of its states"
    own = {state.name for state in spec.states}
    for name in sorted(own):
        if SEPARATOR in name:
            yield f"{where}: state name {name!r} contains the nesting separator {SEPARATOR!r}; rename it"
    known = set(spec.state_paths())
    edges: dict[str, set[str]] = {name: set() for name in known}
    groups: dict[tuple[str, str], list[Transition]] = {}
    seen: set[tuple[str, str, str]] = set()
    for source, dest, row in spec.rows():
        if not (isinstance(row.event, type) and issubclass(row.event, Event)):
            yield f"{where}: row {row.event!r} -> {row.dest_name} is not keyed by an Event class"
            continue
        for path in (source, dest):
            if path not in known:
                yield f"{where}: row {row.trigger!r} names unknown state {path!r}"
        if (source, row.trigger, dest) in seen:
            yield f"{where}: row ({source}, {row.trigger}, {dest}) is declared twice"
        seen.add((source, row.trigger, dest))
        edges.setdefault(source, set()).add(dest)
        groups.setdefault((source, row.trigger), []).append(row)
    for (source, trigger), rows in groups.items():
        for row in rows[:-1]:
            if not row.guards:
                yield (
                    f"{where}: in state {source} the unguarded row {trigger!r} -> {row.dest_name} "
                    "hides the rows after it; put it last"
                )
    _add_nesting_edges(spec, edges)
    reachable = _closure(edges, [spec.initial.name])
    for path in spec.state_paths():
        if path not in reachable:
            yield f"{where}: state {path} is unreachable from {spec.initial.name}"
    final_names = {state.name for state in spec.final}
    for name in own & final_names:
        if edges.get(name):
            yield f"{where}: final state {name} has outgoing transitions"
    resting = final_names | {spec.initial.name}
    for path in spec.state_paths():
        if path in final_names:
            continue
        if not _closure(edges, [path]) & resting:
            yield f"{where}: state {path} is a trap (it can reach neither {spec.initial.name} nor a final state)"


def _add_nesting_edges(spec: MachineSpec, edges: dict[str, set[str]], prefix: str = "") -> None:
    """Entering a parent enters its nested initial state; leaving a parent's row leaves from any child."""
    for state, child in spec.nested.items():
        parent = prefix + state.name
        child_prefix = parent + SEPARATOR
        edges.setdefault(parent, set()).add(child_prefix + child.initial.name)
        for path in child.state_paths(child_prefix):
            edges.setdefault(path, set()).update(edges.get(parent, set()) - {child_prefix + child.initial.name})
        _add_nesting_edges(child, edges, child_prefix)


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
    """One fired transition, as recorded in artifacts, and which row of the table fired it (its index
    in `MachineSpec.rows()`, so rows that share a source, trigger and dest stay apart)."""

    machine: str
    source: str
    trigger: str
    dest: str
    row: int

    def as_log(self) -> dict[str, str]:
        """As artifacts record it (what dataclasses.asdict gives, without its deep copy per call)."""
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

    def __init__(self, spec: MachineSpec, model: ModelT) -> None:
        validate_spec(spec, model)
        self.spec = spec
        self.model = model
        self.fired: list[Fired] = []
        self._row = -1  # the row the event being fired took, noted once its guards let it through
        # A flat table needs none of the hierarchical machine's work per event (a third of a fire).
        machine_class = HierarchicalMachine if spec.nested else Machine
        machine_class(
            model=model,
            states=_hsm_states(spec),
            initial=spec.initial.name,
            transitions=[
                {
                    "trigger": row.trigger,
                    "source": source,
                    "dest": dest,
                    "conditions": list(row.guards),
                    "before": [partial(self._take_row, index)],
                    "after": list(row.actions),
                }
                for index, (source, dest, row) in enumerate(spec.rows())
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
        """Whether some row leaves the current state (or a parent of it) on `event_type`."""
        path = self.path
        return any(
            row.event is event_type and (path == source or path.startswith(source + SEPARATOR))
            for source, _, row in self.spec.rows()
        )

    def fire(self, event: Event) -> list[Any]:
        """Feed one event; return the effects its actions emitted."""
        source = self.path
        trigger = type(event).__name__
        try:
            moved = self.model.trigger(trigger, event)
        except MachineError as error:
            raise InvalidEvent(f"{self.spec.name}: event {trigger} is not accepted in state {source}") from error
        if not moved:
            raise NoTransition(f"{self.spec.name}: every guard refused event {trigger} in state {source}")
        fired = Fired(self.spec.name, source, trigger, self.path, self._row)
        self.fired.append(fired)
        for listener in _listeners:
            listener(fired)
        return self.model._take_effects()

    def _take_row(self, index: int, event: Event) -> None:
        self._row = index

    def take_fired(self) -> list[Fired]:
        """What fired since the last take, handed over and forgotten here: a long run's driver takes
        each turn's transitions, so the machine keeps no history that grows with the run."""
        taken, self.fired = self.fired, []
        return taken


def _hsm_states(spec: MachineSpec) -> list[Any]:
    states: list[Any] = []
    for state in spec.states:
        if state in spec.nested:
            child = spec.nested[state]
            states.append({"name": state.name, "children": _hsm_states(child), "initial": child.initial.name})
        else:
            states.append(state.name)
    return states

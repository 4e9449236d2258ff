"""Strategy machines, one module each, and the records every other list derives from.

`STRATEGIES` is the one list of strategies: the profile's allowed `runtime.strategy` values, the
machines `turnstate diagrams` draws and the coverage gate checks (`MACHINES`) all come from it.
`MACHINES` holds every configuration of every machine, named "<strategy>" for a strategy that never
compacts by itself and "<strategy>.<compaction kind>" for the others.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnstate.machine.engine import MachineSpec
from turnstate.strategies import continuous_conversation, manual_rolling, previous_response_id
from turnstate.strategies.compaction import Kind
from turnstate.strategies.strategy import Strategy

STRATEGIES: Mapping[str, Strategy] = {
    record.name: record
    for record in (manual_rolling.DEFINITION, previous_response_id.DEFINITION, continuous_conversation.DEFINITION)
}


def configuration_name(strategy: Strategy, kind: Kind) -> str:
    return strategy.name if len(strategy.specs) == 1 else f"{strategy.name}.{kind}"


# Every machine turnstate declares, per configuration: what `turnstate diagrams` draws and the coverage gate checks.
MACHINES: Mapping[str, MachineSpec] = {
    configuration_name(strategy, kind): spec
    for strategy in STRATEGIES.values()
    for kind, spec in strategy.specs.items()
}

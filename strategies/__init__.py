"""Strategy machines, one module each, and the records every other list derives from.

`STRATEGIES` is the one list of strategies: the profile's allowed `runtime.strategy` values, the
machines `turnstate diagrams` draws and the coverage gate checks (`MACHINES`) all come from it.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnstate.machine.engine import MachineSpec
from turnstate.strategies import continuous_conversation, manual_rolling, previous_response_id
from turnstate.strategies.strategy import Strategy

STRATEGIES: Mapping[str, Strategy] = {
    record.name: record
    for record in (manual_rolling.DEFINITION, previous_response_id.DEFINITION, continuous_conversation.DEFINITION)
}

# Every machine turnstate declares: what `turnstate diagrams` draws and the coverage gate checks.
MACHINES: Mapping[str, MachineSpec] = {record.spec.name: record.spec for record in STRATEGIES.values()}

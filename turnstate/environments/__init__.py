"""The games an agent plays, behind one small protocol, chosen in a profile by a registered id.

protocol.py says what an environment is (reset, observe, the action space, step, receipts, and the
frame text that is its rendering for the model); registry.py turns an id into an environment, the
built-in beacon_grid or one an installed package registers through the `turnstate.environments`
entry-point group. Everything game-specific stays in the game's own module.
"""

from turnstate.environments.protocol import (
    RESET,
    Environment,
    EnvironmentConfigError,
    EnvironmentFactory,
    EnvironmentFault,
    Frame,
    GameState,
    Receipt,
)
from turnstate.environments.registry import (
    BUILTIN_ENVIRONMENTS,
    ENTRY_POINT_GROUP,
    EnvironmentWarning,
    environment_ids,
    make_environment,
    unmet_requirement,
)

__all__ = [
    "BUILTIN_ENVIRONMENTS",
    "ENTRY_POINT_GROUP",
    "RESET",
    "Environment",
    "EnvironmentConfigError",
    "EnvironmentFactory",
    "EnvironmentFault",
    "EnvironmentWarning",
    "Frame",
    "GameState",
    "Receipt",
    "environment_ids",
    "make_environment",
    "unmet_requirement",
]

"""Deprecated: the environments' plugin API is `turnstate.environments`. This name re-exports it,
and its modules (protocol, registry, the built-in games), for one release, with a DeprecationWarning."""

import importlib
import sys
import warnings

from turnstate.environments import *  # noqa: F403
from turnstate.environments import __all__  # noqa: F401

MODULES = ("protocol", "registry", "levels", "beacon_grid", "catalog_hunt", "arc_agi3")

warnings.warn(
    "turnstate.harness.environments is deprecated and will be removed in the next release; "
    "import turnstate.environments instead",
    DeprecationWarning,
    stacklevel=2,
)
for _name in MODULES:  # `from turnstate.harness.environments.protocol import Frame` still works
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"turnstate.environments.{_name}")

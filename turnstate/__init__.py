"""turnstate: an LLM agent's runtime state, carried across turns as explicit state machines.

The Python API for your own agent loop (README: "Python API"):

- `Session`: open it from a profile (`load_profile`) as a context manager; `observe` an input, get
  the model's `Turn`, then `accept` or `reject` it: only what you accept commits.
- `FailedClosed`: a turn that cannot go on; the accepted state is intact.
- `RuntimeState`: the accepted state (`Session.accepted_state`), serializable with `to_json`.
"""

from turnstate.session.profile import DEFAULT_PROFILE, Profile, ProfileError, load_profile, parse_profile
from turnstate.session.session import FailedClosed, RunResult, Session, Turn
from turnstate.strategies.state import RuntimeState

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PROFILE",
    "FailedClosed",
    "Profile",
    "ProfileError",
    "RunResult",
    "RuntimeState",
    "Session",
    "Turn",
    "load_profile",
    "parse_profile",
]

"""turnstate: an LLM agent's runtime state, carried across turns as explicit state machines."""

__version__ = "0.1.0"

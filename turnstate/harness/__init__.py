"""The old home of the harness, cut into floors (turnstate.environments, durable, session, sweeps,
reports, cli). Only the environments' plugin API is still importable here, for one release, so that
a game package written against `turnstate.harness.environments` keeps working while it moves."""

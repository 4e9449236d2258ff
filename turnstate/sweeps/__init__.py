"""Sweeps: a plan of profiles x environments x seeds (plan.py), played as ordinary runs by an engine
(engines.py: the driver and the local process pool; ray_engine.py: Ray tasks)."""

"""The run folder: what a run leaves on disk and reads back.

layout.py names every file; checkpoints/ is the store of accepted turns behind one protocol;
events.py the normalized conversation log; artifacts.py the step records and the one place where
redaction happens; accounting.py the usage journal; side_effects.py the action journal that makes
actions exactly-once; tool_results.py offloaded tool results; resume.py what a resume reads back."""

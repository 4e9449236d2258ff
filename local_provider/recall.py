"""What a reasoning model's private thought says about where it found the fact it needs, for every
game the local model plays: the fact shown in the current turn (the thought notes it, which is how
it survives in the sealed reasoning), in the messages the context kept, in its notes, or nowhere
(it guesses)."""

from __future__ import annotations


def recall_thought(subject: str, fact: str, noted_line: str | None, kept: bool, noted: bool, guess: str) -> str:
    """The thought: `noted_line` when the current turn shows the fact, else where it came from.
    `subject` names the level ("Level 2"), `fact` the kind of fact ("beacon"), `guess` what the model
    does without it ("guessing door A")."""
    if noted_line is not None:
        return noted_line
    if kept:
        return f"{subject}: following the {fact} the kept messages show."
    if noted:
        return f"{subject}: following the {fact} I noted."
    return f"{subject}: no {fact} noted, {guess}."

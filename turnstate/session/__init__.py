"""A run's session: the profile schema, the Session a caller drives turn by turn, the effect loop that
performs what the machines decide, and the Runner that plays an environment through it."""

"""Runs: their settings, the conductor that drives the pure loop, sessions in memory,
sub-agents, hooks, and the fan-out of events to clients."""

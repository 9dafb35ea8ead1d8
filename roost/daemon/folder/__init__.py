"""Reading a project on a run's behalf: its root, bounded file reads, configuration, trust,
agents, Claude Code's files, custom commands and the prompt's layers."""

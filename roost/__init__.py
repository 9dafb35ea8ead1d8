"""roost: a local-first agent runtime.

One per-user daemon owns every agent session on the machine; thin clients talk to it over a
Unix socket with msgpack-RPC. See ARCHITECTURE.md for the layout.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

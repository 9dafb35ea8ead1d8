"""The interactive shell: ``roost``, ``roost shell`` and ``roost attach``.

Importing this package costs no prompt_toolkit: the commands import the shell itself when
they run. Layers: :mod:`roost.protocol.asyncio_client` (msgpack-RPC on asyncio) → :mod:`._view`
(a fold of the session's events: status, requests, figures) and :mod:`._transcript` (events to
committed lines) → :mod:`._display` and :mod:`._markdown` (pure: state to formatted text) →
:mod:`._app` (the prompt_toolkit application) and :mod:`._shell` (the controller), whose
parts are :mod:`._keeper` (staying connected), :mod:`._requests` (approvals, questions,
trust) and :mod:`._builtins` (the built-in slash commands).
"""

from ._open import attach, shell

__all__ = ["attach", "shell"]

"""A faster ``dataclasses.replace`` for the loop's frozen values, which folding an event
copies several times.

``dataclasses.replace`` looks up the class's fields and checks each, then calls the
generated ``__init__`` with every field as a keyword: about 4 µs for a
:class:`~roost.loop.SessionState` of twenty fields, a dozen times a step. Here each class
gets, at its first copy, a function made for it (as ``dataclasses`` makes ``__init__``:
source text, compiled once) that sets the copy's slots directly: about 1.8 µs. Only for
frozen dataclasses whose fields are all set by ``__init__`` and that have no
``__post_init__`` (there is nothing for ``__init__`` to do but set them).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, Callable, TypeVar

_T = TypeVar("_T")

#: The copying function of each class, made at its first copy.
_COPIERS: dict[type, Callable[..., Any]] = {}


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of ``obj`` with ``changes`` (as ``dataclasses.replace``).

    Raises:
        TypeError: a change names no field of ``obj``.
    """
    copier = _COPIERS.get(type(obj))
    if copier is None:
        copier = _COPIERS[type(obj)] = _copier(type(obj))
    result: _T = copier(obj, **changes)
    return result


def _copier(cls: type) -> Callable[..., Any]:
    if not is_dataclass(cls) or hasattr(cls, "__post_init__") or any(not f.init for f in fields(cls)):
        raise TypeError(f"{cls.__name__}: replace copies only dataclasses that __init__ just sets")
    names = [f.name for f in fields(cls)]  # identifiers: safe to put in source text
    source = (
        f"def copy(obj, /, *, {', '.join(f'{n}=_KEEP' for n in names)}):\n"
        "    new = _new(_cls)\n"
        + "".join(f"    _set(new, {n!r}, obj.{n} if {n} is _KEEP else {n})\n" for n in names)
        + "    return new\n"
    )
    scope: dict[str, Any] = {"_KEEP": object(), "_new": object.__new__, "_cls": cls, "_set": object.__setattr__}
    exec(source, scope)  # noqa: S102 - our own field names only, as dataclasses does
    copier: Callable[..., Any] = scope["copy"]
    return copier

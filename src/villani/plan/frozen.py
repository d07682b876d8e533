"""Resolved parameters as immutable values, read by key or by attribute.

:func:`villani.plan.config.resolve` returns a :class:`Params`: ``p["train"]["lr"]`` and
``p.train.lr`` are the same value, of the type the schema gives it (numbers as numbers,
lists as :class:`ParamsList`). Nothing can change it in place — an assignment, ``update``,
``append``… is a ``TypeError`` naming the key — so a stage cannot alter the parameters
another stage, a digest or a manifest reads. A change is made on a copy: ``p.to_dict()``
(or ``copy.deepcopy(p)``) is a plain, mutable ``dict`` of ``dict``/``list``.

Both classes subclass ``dict`` and ``list``, so ``json.dumps`` writes them exactly as the
plain document (the digests of :mod:`villani.plan.digest` are byte for byte those of the
dict), ``isinstance(p, dict)`` holds and ``p == plain`` compares values.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Params", "ParamsList", "freeze", "thaw"]


def _refuse(self, *args, **kwargs):
    raise TypeError("parameters are read-only (resolved by villani.plan.config.resolve); change a copy: "
                    "p.to_dict()")


class _Frozen:
    """What both immutable containers share: a copy is the value itself (nothing can change
    it), a deep copy a plain mutable one, and pickling goes through the plain value."""

    __slots__ = ()

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return thaw(self)

    def __reduce__(self):
        return freeze, (thaw(self),)


class Params(_Frozen, dict):
    """An immutable mapping of parameters, read as ``p["key"]`` or ``p.key`` (module doc)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"parameters have no key {name!r} (keys: {', '.join(map(str, self))})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"parameters are read-only: cannot set {name!r}; change a copy: p.to_dict()")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError(f"parameters are read-only: cannot set {key!r}; change a copy: p.to_dict()")

    __delattr__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def to_dict(self) -> dict:
        """A plain, mutable deep copy (``dict`` of ``dict``/``list``)."""
        return thaw(self)


class ParamsList(_Frozen, list):
    """An immutable list of parameter values (module doc)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = remove = pop = clear = sort = \
        reverse = _refuse

    def to_list(self) -> list:
        """A plain, mutable deep copy."""
        return thaw(self)


def freeze(value: Any) -> Any:
    """``value`` with every mapping a :class:`Params` and every list or tuple a :class:`ParamsList`."""
    if isinstance(value, dict):
        return value if type(value) is Params else Params({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return value if type(value) is ParamsList else ParamsList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain deep copy of ``value``: ``dict`` of ``dict``/``list`` (the inverse of :func:`freeze`)."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value

"""Name -> class registries for the swappable round stages (no if/elif on strings)."""
from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from policyopt.errors import InputError, UnknownNameError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A registry of stage classes of one kind, created by name with keyword options.

    >>> reg: Registry[object] = Registry("example")
    >>> @reg.register("thing")
    ... class Thing:
    ...     def __init__(self, size: int = 1) -> None:
    ...         self.size = size
    >>> reg.create("thing", size=3).size
    3
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator registering ``cls`` under ``name`` (names are unique)."""

        def deco(cls: type) -> type:
            if name in self._classes:
                raise InputError(f"{self.kind}.name", name, "already registered")
            self._classes[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def create(self, name: str, **options: Any) -> T:
        """Instantiate the class registered as ``name`` with ``options``."""
        try:
            cls = self._classes[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._classes) from None
        return cls(**options)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._classes)

    def __contains__(self, name: object) -> bool:
        return name in self._classes

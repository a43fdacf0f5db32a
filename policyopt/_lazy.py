"""Lazy re-exports for package ``__init__`` modules: a name's module is imported on first access, so
importing the package stays light (and works without the optional extras a submodule needs)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str],
                 eager: Mapping[str, Any] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a public name to the module that
    defines it (relative to ``package`` when it starts with ``.``). A loaded value is cached in the
    package's namespace (``eager``: that namespace, i.e. the package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        if eager is not None:
            eager[name] = value  # type: ignore[index]
        return value

    def __dir__() -> list[str]:
        return sorted(set(eager or ()) | set(exports))

    return __getattr__, __dir__

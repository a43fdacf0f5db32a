"""Registries that extensions join, so the core never names an extension.

The core (problem parsing, result serialization, policy lookup) looks its extension points up
here; an extension registers its parts when it is imported:

* **problem kinds** by top-level key — :func:`register_problem_kind`: a problem whose JSON object
  carries the key (e.g. ``"reconfig"``) is parsed by that kind's parser, which returns a
  :class:`~policyopt.problem.Problem` (subclass);
* **result sections** — :func:`register_result_section`: ``PolicyResult.to_dict`` adds
  ``name: section(result)`` when the section returns a value and the result does not already carry
  ``name`` (e.g. ``"sla_report"``);
* **policies** — :func:`policyopt.policy.register_policy`; **allocation spaces** —
  :func:`policyopt.policy.register_space`.

Discovery (:func:`discover`) imports the extensions, once, and only when a lookup misses (an
unregistered policy name, a problem key the core does not know, listing every policy), so
``import policyopt`` and the lookup of a core policy stay light:

1. every subpackage of ``policyopt`` that holds an ``_extension`` module (module discovery: the
   package directories are listed, only packages with that module are imported);
2. every entry point of the ``policyopt.extensions`` group of installed distributions (third-party
   extensions; the entry point names a module to import).

Policy plugins (``POLICYOPT_PLUGINS``, the ``policyopt.policies`` entry-point group) are loaded by
:func:`policyopt.policy.load_plugins`.
"""
from __future__ import annotations

import importlib
import logging
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:
    from .problem import Problem
    from .result import PolicyResult

__all__ = ["register_problem_kind", "register_result_section", "problem_parser", "result_sections",
           "discover", "EXTENSION_MODULE", "ENTRY_POINT_GROUP"]

log = logging.getLogger(__name__)

#: the module an in-tree extension package holds; importing it registers the package's parts
EXTENSION_MODULE = "_extension"
#: entry-point group of third-party extensions (each names a module to import)
ENTRY_POINT_GROUP = "policyopt.extensions"

ProblemParser = Callable[[Mapping[str, Any]], "Problem"]
ResultSection = Callable[["PolicyResult"], Any]

_PROBLEM_KINDS: dict[str, ProblemParser] = {}
_RESULT_SECTIONS: dict[str, ResultSection] = {}
_DISCOVERED = False


def register_problem_kind(key: str, parser: ProblemParser) -> None:
    """A problem whose JSON object has the top-level ``key`` is parsed by ``parser(data)``.
    Re-registering a key replaces its parser (a module imported twice registers the same one)."""
    _PROBLEM_KINDS[key] = parser


def register_result_section(name: str, section: ResultSection) -> None:
    """``PolicyResult.to_dict`` adds ``name: section(result)`` where ``section`` returns a value
    other than ``None`` and the result's ``extra`` does not already hold ``name``."""
    _RESULT_SECTIONS[name] = section


def result_sections() -> Mapping[str, ResultSection]:
    """The registered result sections (by name, in registration order)."""
    return _RESULT_SECTIONS


def problem_parser(data: Mapping[str, Any], core_keys: Iterable[str]) -> ProblemParser | None:
    """The parser of the registered kind whose key ``data`` carries, or ``None`` for a core problem.
    A key that is neither a core key nor registered triggers discovery once, then the lookup again."""
    parser = _find_kind(data)
    if parser is None and not _DISCOVERED and set(data) - set(core_keys):
        discover()
        parser = _find_kind(data)
    return parser


def _find_kind(data: Mapping[str, Any]) -> ProblemParser | None:
    for key in data:
        parser = _PROBLEM_KINDS.get(key)
        if parser is not None:
            return parser
    return None


def _in_tree_extensions() -> list[str]:
    """Subpackages of ``policyopt`` that hold an ``_extension`` module (found without importing)."""
    import policyopt

    names = []
    for base in policyopt.__path__:
        for info in pkgutil.iter_modules([base]):
            inner = pkgutil.iter_modules([str(Path(base, info.name))]) if info.ispkg else ()
            if any(m.name == EXTENSION_MODULE for m in inner):
                names.append(f"policyopt.{info.name}.{EXTENSION_MODULE}")
    return sorted(names)


def discover(force: bool = False) -> list[str]:
    """Import every extension (module docstring), once; returns the modules imported by this call.
    A third-party entry point that fails to load is logged and skipped (the core keeps working);
    an in-tree extension that fails to import raises (that is a bug, not a missing plugin)."""
    global _DISCOVERED
    if _DISCOVERED and not force:
        return []
    _DISCOVERED = True
    loaded = []
    for name in _in_tree_extensions():
        importlib.import_module(name)
        loaded.append(name)
    from importlib import metadata

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken third-party plugin must not break the core
            log.warning("policyopt extension %r (%s) failed to load: %s", ep.name, ep.value, exc)
            continue
        loaded.append(ep.value)
    return loaded

"""The installed layout: ``formulations/`` and ``solvers/`` of a checkout are the subpackages
``policyopt.formulations`` and ``policyopt.solvers`` only once the project is installed
(``package-dir`` in pyproject.toml). Run from a checkout without installing, ``import policyopt``
works but every solve would fail later with a bare ``No module named 'policyopt.solvers'``; this
check fails at import instead, saying what to do."""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

MAPPED = ("formulations", "solvers")


class NotInstalledError(ImportError):
    """``policyopt`` was imported from a source checkout that is not installed."""


def check_installed_layout(package: str, path: Sequence[str]) -> None:
    """Raise :class:`NotInstalledError` when a mapped subpackage is missing but the checkout has its folder."""
    for sub in MAPPED:
        if importlib.util.find_spec(f"{package}.{sub}") is not None:
            continue
        checkout = next((Path(p).parent for p in path if (Path(p).parent / sub / "__init__.py").is_file()), None)
        if checkout is None:  # not a checkout: an incomplete install; let the import error speak later
            return
        raise NotInstalledError(
            f"{package}.{sub} is not importable: this is the source checkout at {checkout}, which is not installed. "
            f"Its {sub}/ folder becomes {package}.{sub} only when the project is installed: run "
            f"`pip install -e {checkout}` in this environment first (the README's set-up command does it).",
            name=f"{package}.{sub}")

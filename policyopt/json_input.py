"""Reading untrusted JSON: every way a document can be broken is one :class:`InputError`.

:func:`loads` turns bytes or text into Python objects and refuses, each with one line naming the
source (a file, ``body``, ...) and what is wrong:

* bytes that are not UTF-8 (JSON text is UTF-8, RFC 8259), with the byte offset;
* malformed JSON, with line and column;
* nesting deeper than Python's JSON parser can follow (``[[[[...`` 100,000 deep);
* integers with more digits than Python converts (4,300 by default);
* strings holding a lone UTF-16 surrogate (``"\\ud800"``): not Unicode text, they cannot be
  written to a database, a file name or a UTF-8 response; the error names the field.

The CLI (``policyopt solve --input``, ``policyopt run --jobs``) and the HTTP service read through
it, so the same input gets the same error everywhere (exit code 2 / HTTP 422).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["loads", "read", "find_lone_surrogate"]

#: a ``\\uD800``-``\\uDFFF`` escape in raw JSON (only then can a lone surrogate appear)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_lone_surrogate(obj: Any, path: str) -> str | None:
    """The dotted path of the first string (value or key) in ``obj`` holding a lone surrogate."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, p = stack.pop()
        if isinstance(value, str):
            if _has_surrogate(value):
                return p
        elif isinstance(value, dict):
            for k, v in value.items():
                kp = f"{p}.{k}" if p else str(k)
                if isinstance(k, str) and _has_surrogate(k):
                    return f"{p}.{k.encode('utf-8', 'backslashreplace').decode()}" if p else "(key)"
                stack.append((v, kp))
        elif isinstance(value, list):
            stack.extend((v, f"{p}[{i}]") for i, v in enumerate(value))
    return None


def loads(data: bytes | str, source: str = "input") -> Any:
    """Parse JSON ``data`` (bytes must be UTF-8); any defect is an ``InputError`` on ``source``."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(source, f"byte {exc.start}: {raw[exc.start:exc.start + 4]!r}",
                             "not UTF-8 text (JSON must be UTF-8)") from None
    else:
        text = str(data)
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(source, f"character {exc.start}", "the text holds a lone UTF-16 surrogate") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno} column {exc.colno}", f"malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(source, "nesting", "JSON nested too deeply (objects/arrays inside each other "
                                            "hundreds of levels deep)") from None
    except ValueError as exc:  # int("1" * 10_000): the digit limit of int conversion
        msg = str(exc).split(";")[0]
        raise InputError(source, "integer", f"number too large: {msg}") from None
    if _SURROGATE_ESCAPE.search(raw):
        where = find_lone_surrogate(obj, "")
        if where is not None:
            raise InputError(where or source, "\\ud8xx", "a string holds a lone UTF-16 surrogate (not valid Unicode)")
    return obj


def read(path: str | Path, field: str = "input") -> Any:
    """A JSON file's content; a missing, unreadable or broken file is an ``InputError`` on
    ``field`` naming the file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(field, str(p), "file not found") from None
    except IsADirectoryError:
        raise InputError(field, str(p), "is a directory, not a JSON file") from None
    except OSError as exc:
        raise InputError(field, str(p), f"cannot be read: {exc.strerror}") from None
    try:
        return loads(data, field)
    except InputError as exc:
        raise InputError(exc.field, f"{p}: {exc.value}", exc.problem) from None

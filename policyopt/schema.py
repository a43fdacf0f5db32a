"""The interchange format's one definition: field tables, the number range, the JSON Schema.

Every field of the problem JSON (``docs/schema.md``) is declared once here, as a :class:`FieldSpec`
(type, bounds, default, required, doc). :mod:`policyopt.problem` validates against these tables
(column-wise, one pass per field over all jobs), :func:`problem_json_schema` turns them into the
published JSON Schema, and the HTTP service's OpenAPI embeds that schema, so the validator, the
documentation and the OpenAPI cannot drift apart.

Numbers: every non-zero number of a problem must have a magnitude within :data:`MAGNITUDE`
(``[1e-9, 1e15]``): outside it the LP's coefficients (throughputs, their inverses as normalizers,
sums over jobs) lose all precision. Integers are JSON integers or integral floats (``2`` or
``2.0``); booleans and numeric strings are never numbers.

No third-party imports: the core's parser and the schema generator need only the standard library.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = [
    "MAGNITUDE",
    "FieldSpec",
    "WORKER_TYPE_FIELDS",
    "JOB_FIELDS",
    "COLOCATED_FIELDS",
    "COLOCATED_TYPE_FIELDS",
    "ENTITY_FIELDS",
    "PROBLEM_SECTIONS",
    "closest",
    "unknown_field_message",
    "field_json_schema",
    "object_json_schema",
    "job_json_schema",
    "cluster_json_schema",
    "problem_json_schema",
    "schema_table",
]

#: the one accepted magnitude range of a non-zero number (CLI, Python API and HTTP alike)
MAGNITUDE: tuple[float, float] = (1e-9, 1e15)


@dataclass(frozen=True)
class FieldSpec:
    """One field of an interchange object.

    ``type``: ``integer`` | ``number`` | ``string`` | ``boolean`` | ``id`` (string; numbers are
    converted) | ``throughputs`` (object config → number ≥ 0) | ``pair`` (two job ids) |
    ``type_pair`` (two strings) | ``number_pair`` (two numbers ≥ 0) | ``name`` (a non-empty string).
    ``minimum`` applies to numbers (``exclusive``: strictly above it).
    """

    name: str
    type: str
    doc: str
    required: bool = False
    default: Any = None
    minimum: float | None = None
    exclusive: bool = False
    nullable: bool = False
    choices: tuple[str, ...] | None = None


WORKER_TYPE_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("count", "integer", "workers (GPUs) of this type; the cluster's total must be > 0",
              required=True, minimum=0),
    FieldSpec("gpus_per_server", "integer", "GPUs per server (consolidation)", minimum=1, nullable=True),
    FieldSpec("price_per_hour", "number", "dollars per worker-hour (cost policies)", minimum=0, nullable=True),
)

JOB_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("id", "id", "unique job id (numbers are converted to strings)", required=True),
    FieldSpec("throughputs", "throughputs",
              "steps/s of the whole job holding scale_factor workers of a configuration (a worker type or "
              "<type>_unconsolidated); 0 or missing = cannot run there", required=True),
    FieldSpec("scale_factor", "integer", "workers the job needs at once", default=1, minimum=1, nullable=True),
    FieldSpec("weight", "number", "priority weight", default=1.0, minimum=0, exclusive=True, nullable=True),
    FieldSpec("steps_remaining", "number", "steps left", default=1.0, minimum=0, nullable=True),
    FieldSpec("time_since_start", "number", "seconds since the job started", default=0.0, minimum=0,
              nullable=True),
    FieldSpec("isolated_time", "number", "seconds the job would have run in isolation for the steps it has done "
              "(Gavel's cumulative isolated time; finish-time fairness; default: time_since_start)", minimum=0,
              nullable=True),
    FieldSpec("entity", "string", "tenant (a key of entities when entities is given)", nullable=True),
    FieldSpec("slo_seconds", "number", "deadline, seconds from now", minimum=0, exclusive=True, nullable=True),
    FieldSpec("arrival", "number", "arrival order for FIFO-style policies (default: list order)", nullable=True),
    FieldSpec("priority", "boolean", "high priority / deadline-bound: never packed with another job",
              default=False, nullable=True),
    FieldSpec("job_type", "name", "the job's kind: keys into colocated_types", nullable=True),
)

COLOCATED_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("jobs", "pair", "the two job ids sharing scale_factor workers", required=True),
    FieldSpec("worker_type", "name", "configuration where they share", required=True),
    FieldSpec("throughputs", "number_pair", "each job's steps/s while paired (0 = cannot pair)", required=True),
)

COLOCATED_TYPE_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("job_types", "type_pair", "two job types: any job of the first paired with any of the second",
              required=True),
    FieldSpec("worker_type", "name", "configuration where they share", required=True),
    FieldSpec("throughputs", "number_pair", "steps/s of each type while paired, in the order of job_types",
              required=True),
)

ENTITY_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("weight", "number", "the tenant's share weight", default=1.0, minimum=0, exclusive=True),
    FieldSpec("policy", "string", "how its jobs share its part", default="fairness", choices=("fairness", "fifo")),
)

#: top-level keys of a problem (extensions such as ``reconfig`` are routed before parsing)
PROBLEM_SECTIONS: tuple[str, ...] = ("cluster", "jobs", "colocated", "colocated_types", "entities")


# ------------------------------------------------------------------------------------ messages
def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib ratio ≥ 0.6), else None."""
    hits = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return hits[0] if hits else None


def unknown_field_message(name: str, allowed: Iterable[str]) -> str:
    """``unknown field (did you mean 'cluster'?); allowed: ...``."""
    allowed = sorted(allowed)
    guess = closest(name, allowed)
    hint = f" (did you mean {guess!r}?)" if guess else ""
    return f"unknown field{hint}; allowed: {', '.join(allowed)}"


# ------------------------------------------------------------------------------------ JSON Schema
def _number_schema(f: FieldSpec, integer: bool) -> dict[str, Any]:
    hi = MAGNITUDE[1]
    out: dict[str, Any] = {"type": "integer" if integer else "number", "maximum": hi}
    if f.minimum is not None:
        out["exclusiveMinimum" if f.exclusive else "minimum"] = f.minimum
    elif not integer:
        out["minimum"] = -hi
    return out


def field_json_schema(f: FieldSpec) -> dict[str, Any]:
    """The JSON Schema of one field (nullable fields accept ``null``)."""
    hi = MAGNITUDE[1]
    nonneg = {"type": "number", "minimum": 0, "maximum": hi}
    s: dict[str, Any]
    if f.type in ("integer", "number"):
        s = _number_schema(f, f.type == "integer")
    elif f.type == "id":
        s = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "number"}]}
    elif f.type == "string":
        s = {"type": "string"}
        if f.choices:
            s["enum"] = list(f.choices)
    elif f.type == "name":
        s = {"type": "string", "minLength": 1}
    elif f.type == "boolean":
        s = {"type": "boolean"}
    elif f.type == "throughputs":
        s = {"type": "object", "additionalProperties": nonneg}
    elif f.type in ("pair", "type_pair"):
        item = {"anyOf": [{"type": "string"}, {"type": "number"}]} if f.type == "pair" else {"type": "string"}
        s = {"type": "array", "items": item, "minItems": 2, "maxItems": 2}
    elif f.type == "number_pair":
        s = {"type": "array", "items": nonneg, "minItems": 2, "maxItems": 2}
    else:  # pragma: no cover - the tables above use only the types listed
        raise ValueError(f"unknown field type {f.type!r}")
    if f.nullable:
        s = {"anyOf": [s, {"type": "null"}]}
    s["description"] = f.doc
    if f.default is not None:
        s["default"] = f.default
    return s


def object_json_schema(fields: Iterable[FieldSpec], description: str = "",
                       require: Iterable[str] = ()) -> dict[str, Any]:
    """A closed object (``additionalProperties: false``) with ``fields``; ``require`` adds required names."""
    fields = list(fields)
    required = [f.name for f in fields if f.required] + [r for r in require if r not in {f.name for f in fields
                                                                                         if f.required}]
    out: dict[str, Any] = {"type": "object", "properties": {f.name: field_json_schema(f) for f in fields},
                           "additionalProperties": False}
    if required:
        out["required"] = required
    if description:
        out["description"] = description
    return out


def job_json_schema(require: Iterable[str] = ()) -> dict[str, Any]:
    """The schema of one job object (``require``: fields a context makes required, e.g. sessions
    require ``steps_remaining``)."""
    return object_json_schema(JOB_FIELDS, "a training job", require)


def cluster_json_schema() -> dict[str, Any]:
    """The schema of ``cluster``: worker type name → spec (or a bare count)."""
    wt = object_json_schema(WORKER_TYPE_FIELDS, "a worker type")
    return {"type": "object", "additionalProperties": False, "required": ["worker_types"],
            "properties": {"worker_types": {
                "type": "object", "description": "worker type name -> spec (a bare number is its count)",
                "additionalProperties": {"anyOf": [wt, {"type": "integer", "minimum": 0}]}}}}


def problem_json_schema(extensions: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, self-contained: no ``$ref``) of an interchange problem.

    ``extensions``: extra top-level sections (name → schema), e.g. the ``reconfig`` section."""
    lo, hi = MAGNITUDE
    props: dict[str, Any] = {
        "cluster": cluster_json_schema(),
        "jobs": {"type": "array", "items": job_json_schema(), "description": "the jobs (may be empty)"},
        "colocated": {"type": "array", "items": object_json_schema(COLOCATED_FIELDS, "a pair of jobs sharing workers")},
        "colocated_types": {"type": "array",
                            "items": object_json_schema(COLOCATED_TYPE_FIELDS, "space sharing by job type")},
        "entities": {"type": "object", "description": "tenant name -> weight and policy",
                     "additionalProperties": object_json_schema(ENTITY_FIELDS, "a tenant")},
    }
    for name, schema in (extensions or {}).items():
        props[name] = dict(schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "policyopt problem",
            "description": f"Interchange problem (docs/schema.md). Non-zero numbers have magnitudes in "
                           f"[{lo:g}, {hi:g}]; unknown fields are rejected.",
            "type": "object", "required": ["cluster", "jobs"], "additionalProperties": False, "properties": props}


def schema_table() -> str:
    """The field table of ``docs/schema.md`` (markdown), generated from the field tables."""
    def kind(f: FieldSpec) -> str:
        t = {"integer": "int", "id": "string (numbers are converted)", "throughputs": "object {config: number ≥ 0}",
             "pair": "two job ids", "type_pair": "two job types", "number_pair": "two numbers ≥ 0",
             "name": "non-empty string"}.get(f.type, f.type)
        if f.minimum is not None:
            t += f" {'>' if f.exclusive else '≥'} {f.minimum:g}"
        if f.choices:
            t = " or ".join(f"`{c}`" for c in f.choices)
        extra = []
        if f.required:
            extra.append("required")
        if f.default is not None:
            extra.append(f"default {f.default!r}".replace("'", ""))
        if f.nullable:
            extra.append("or null")
        return t + (", " + ", ".join(extra) if extra else "")

    rows = ["| field | type | meaning |", "|---|---|---|"]
    for prefix, fields in (("cluster.worker_types.<name>", WORKER_TYPE_FIELDS), ("jobs[]", JOB_FIELDS),
                           ("colocated[]", COLOCATED_FIELDS), ("colocated_types[]", COLOCATED_TYPE_FIELDS),
                           ("entities.<name>", ENTITY_FIELDS)):
        rows += [f"| `{prefix}.{f.name}` | {kind(f)} | {f.doc} |" for f in fields]
    return "\n".join(rows)

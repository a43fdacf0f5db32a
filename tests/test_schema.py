"""One schema, one validator (issue 15 item 3, issue 23 item 2): the field tables of
``policyopt.schema`` drive the column-wise parser, the published JSON Schema and the OpenAPI."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError
from policyopt.problem import Cluster, Problem
from policyopt.problem_records import _job_from_raw
from policyopt.schema import (COLOCATED_FIELDS, COLOCATED_TYPE_FIELDS, ENTITY_FIELDS, JOB_FIELDS, MAGNITUDE,
                              PROBLEM_SECTIONS, WORKER_TYPE_FIELDS, problem_json_schema, schema_table)

DOCS = Path(__file__).resolve().parents[1] / "docs"


def base() -> dict[str, Any]:
    return {"cluster": {"worker_types": {"v100": {"count": 2, "gpus_per_server": 2}, "k80": {"count": 2}}},
            "jobs": [{"id": "a", "throughputs": {"v100": 4.0, "k80": 1.0}, "steps_remaining": 10.0},
                     {"id": "b", "throughputs": {"v100": 3.0, "k80": 2}, "scale_factor": 2, "weight": 2,
                      "job_type": "t1", "arrival": 3, "slo_seconds": 100, "priority": True, "entity": None},
                     {"id": 7, "throughputs": {"v100_unconsolidated": 1.5, "v100": 2.0}, "scale_factor": 2.0}]}


# ------------------------------------------------------------------------------------ unknown fields
@pytest.mark.parametrize("mutate, field, guess", [
    (lambda d: d.update(clusters={}), "clusters", "cluster"),
    (lambda d: d["cluster"].update(extra=1), "cluster.extra", None),
    (lambda d: d["cluster"].update(worker_type={}), "cluster.worker_type", "worker_types"),
    (lambda d: d["jobs"][0].update(troughputs={}), "jobs[0].troughputs", "throughputs"),
    (lambda d: d["jobs"][1].update(scalefactor=2), "jobs[1].scalefactor", "scale_factor"),
    (lambda d: d["cluster"]["worker_types"]["v100"].update(gpus_per_sever=2),
     "cluster.worker_types.v100.gpus_per_sever", "gpus_per_server"),
    (lambda d: d.update(colocated_type=[]), "colocated_type", "colocated_types"),
    (lambda d: d.update(entities={"x": {"wieght": 1}}), "entities.x.wieght", "weight"),
])
def test_unknown_fields_are_refused_with_the_closest_name(mutate: Any, field: str, guess: str | None) -> None:
    d = base()
    mutate(d)
    with pytest.raises(InputError) as exc:
        Problem.from_dict(d)
    assert exc.value.field == field
    assert "unknown field" in exc.value.problem
    if guess is not None:
        assert f"did you mean {guess!r}" in exc.value.problem


# ------------------------------------------------------------------------------------ column-wise == per job
def test_columnar_parse_equals_the_per_job_reference() -> None:
    d = base()
    p = Problem.from_dict(d)
    ref = Problem(p.cluster, tuple(_job_from_raw(i, j) for i, j in enumerate(d["jobs"])))
    assert p.jobs == ref.jobs
    for a, b in zip(p.jobs, ref.jobs):  # same Python types, not only equal values
        assert {k: type(v) for k, v in vars(a).items()} == {k: type(v) for k, v in vars(b).items()}
        assert {k: type(v) for k, v in a.throughputs.items()} == {k: type(v) for k, v in b.throughputs.items()}
    assert p.configurations == ref.configurations == ["v100", "k80", "v100_unconsolidated"]
    np.testing.assert_array_equal(p.arrays.T, ref.arrays.T)
    np.testing.assert_array_equal(p.arrays.scale, ref.arrays.scale)
    assert Problem.from_dict(p.to_dict()).to_dict() == p.to_dict()


_NUM = st.one_of(st.integers(1, 5), st.floats(0.5, 5.0))


@st.composite
def _job_docs(draw: Any) -> list[dict[str, Any]]:
    """Valid jobs mixing every shape the column-wise parser takes apart: ints and floats, explicit
    nulls and missing keys, numeric ids, throughput objects with the same or other keys and orders."""
    n = draw(st.integers(1, 8))
    same_keys = draw(st.booleans())
    jobs = []
    for i in range(n):
        keys = ["v100", "k80"] if same_keys else draw(st.permutations(["v100", "k80", "v100_unconsolidated"]))[
            :draw(st.integers(1, 3))]
        job: dict[str, Any] = {"id": i if draw(st.booleans()) else f"j{i}",
                               "throughputs": {k: draw(_NUM) for k in keys}}
        for name, value in (("scale_factor", st.sampled_from([1, 1.0, None])), ("weight", st.one_of(_NUM, st.none())),
                            ("steps_remaining", _NUM), ("time_since_start", st.one_of(_NUM, st.none())),
                            ("slo_seconds", st.one_of(_NUM, st.none())), ("arrival", st.one_of(_NUM, st.none())),
                            ("isolated_time", st.one_of(_NUM, st.none())),
                            ("priority", st.sampled_from([True, False, None])),
                            ("entity", st.sampled_from(["e", None])), ("job_type", st.sampled_from(["t", None]))):
            if draw(st.booleans()):
                job[name] = draw(value)
        jobs.append(job)
    return jobs


@settings(max_examples=60, deadline=None)
@given(_job_docs())
def test_columnar_parse_equals_the_reference_on_any_valid_mix(jobs: list[dict[str, Any]]) -> None:
    d = {"cluster": base()["cluster"], "jobs": jobs}
    p = Problem.from_dict(d)
    ref = [_job_from_raw(i, j) for i, j in enumerate(jobs)]
    assert p.jobs == tuple(ref)
    for a, b in zip(p.jobs, ref):
        assert {k: type(v) for k, v in vars(a).items()} == {k: type(v) for k, v in vars(b).items()}
        assert {k: type(v) for k, v in a.throughputs.items()} == {k: type(v) for k, v in b.throughputs.items()}
        assert a.throughputs is not next(j for j in jobs if str(j["id"]) == a.id)["throughputs"]  # copied
    T = np.array([[j.throughputs.get(c, 0.0) for c in p.configurations] for j in ref])
    np.testing.assert_array_equal(p.arrays.T, T)
    np.testing.assert_array_equal(p.arrays.weights, [j.weight for j in ref])
    np.testing.assert_array_equal(p.arrays.scale, [j.scale_factor for j in ref])


BAD_VALUES: list[tuple[str, Any]] = [
    ("scale_factor", 0), ("scale_factor", 1.5), ("scale_factor", True), ("scale_factor", "2"), ("weight", 0),
    ("weight", -1), ("weight", float("nan")), ("steps_remaining", -1), ("steps_remaining", 1e-12),
    ("time_since_start", float("inf")), ("slo_seconds", 0), ("arrival", "x"), ("arrival", 1e16),
    ("entity", 3), ("priority", 1), ("job_type", ""), ("job_type", 5), ("id", ""), ("id", True), ("id", None),
    ("id", 2 ** 70), ("id", float("nan")), ("throughputs", [1]), ("throughputs", None),
]


@pytest.mark.parametrize("where", [0, 2])
@pytest.mark.parametrize("key, value", BAD_VALUES)
def test_every_bad_value_is_named_like_the_per_job_reference(key: str, value: Any, where: int) -> None:
    d = base()
    d["jobs"][where][key] = value
    with pytest.raises(InputError) as ref:
        _job_from_raw(where, d["jobs"][where])
    with pytest.raises(InputError) as got:
        Problem.from_dict(d)
    assert (got.value.field, got.value.problem) == (ref.value.field, ref.value.problem)
    assert got.value.field.startswith(f"jobs[{where}]")


def test_throughput_errors_name_the_job_by_its_place_in_the_list() -> None:
    d = base()
    d["jobs"][2]["throughputs"]["k80"] = -3.0
    with pytest.raises(InputError) as exc:
        Problem.from_dict(d)
    assert exc.value.field == "jobs[2].throughputs.k80" and "-3.0" in str(exc.value)
    d = base()
    d["jobs"][1]["throughputs"]["tpu"] = 1.0
    with pytest.raises(InputError) as exc:
        Problem.from_dict(d)
    assert exc.value.field == "jobs[1].throughputs" and exc.value.value == "tpu"


def test_first_bad_job_in_list_order_is_reported() -> None:
    d = base()
    d["jobs"][2]["weight"] = -1  # later job, earlier field
    d["jobs"][1]["arrival"] = "soon"  # earlier job, later field
    with pytest.raises(InputError) as exc:
        Problem.from_dict(d)
    assert exc.value.field == "jobs[1].arrival"


# ------------------------------------------------------------------------------------ from_arrays
def test_from_arrays_equals_from_dict_and_names_bad_columns() -> None:
    d = base()
    d["jobs"] = [{"id": f"j{i}", "throughputs": {"v100": float(i + 1), "k80": 0.5}, "scale_factor": 1 + i % 2,
                  "steps_remaining": 10.0 * i, "arrival": float(i)} for i in range(6)]
    ref = Problem.from_dict(d)
    cluster = ref.cluster
    T = np.array([[i + 1.0, 0.5] for i in range(6)])
    p = Problem.from_arrays(cluster, [f"j{i}" for i in range(6)], T, scale_factor=1 + np.arange(6) % 2,
                            steps_remaining=10.0 * np.arange(6), arrival=np.arange(6.0))
    assert p.to_dict() == ref.to_dict()
    np.testing.assert_array_equal(p.arrays.T, ref.arrays.T)
    with pytest.raises(InputError) as exc:
        Problem.from_arrays(cluster, ["a", "b"], np.array([[1.0, 1.0], [np.nan, 1.0]]))
    assert exc.value.field == "jobs[b].throughputs.v100"
    with pytest.raises(InputError) as exc:
        Problem.from_arrays(cluster, ["a", "b"], np.ones((2, 2)), weight=[1.0, 0.0])
    assert exc.value.field == "jobs[b].weight"
    with pytest.raises(InputError) as exc:
        Problem.from_arrays(cluster, ["a", "b"], np.ones((2, 3)))
    assert exc.value.field == "throughputs"
    slo = Problem.from_arrays(cluster, ["a", "b"], np.ones((2, 2)), slo_seconds=[np.nan, 5.0])
    assert [j.slo_seconds for j in slo.jobs] == [None, 5.0]


def test_dataclasses_replace_never_reuses_stale_arrays() -> None:
    import dataclasses

    p = Problem.from_dict(base())
    other = Cluster.from_counts({"k80": 4, "v100": 4})
    q = dataclasses.replace(p, cluster=other)
    assert q.configurations[:2] == ["k80", "v100"]
    np.testing.assert_array_equal(q.arrays.T[:, 0], p.arrays.T[:, 1])


# ------------------------------------------------------------------------------------ JSON Schema
def test_json_schema_lists_exactly_the_fields_the_parser_accepts() -> None:
    s = problem_json_schema()
    props = s["properties"]
    assert set(props) == set(PROBLEM_SECTIONS)
    assert set(props["jobs"]["items"]["properties"]) == {f.name for f in JOB_FIELDS}
    assert {"job_type", "priority", "arrival"} <= set(props["jobs"]["items"]["properties"])
    wt = props["cluster"]["properties"]["worker_types"]["additionalProperties"]["anyOf"][0]
    assert set(wt["properties"]) == {f.name for f in WORKER_TYPE_FIELDS}
    assert set(props["colocated"]["items"]["properties"]) == {f.name for f in COLOCATED_FIELDS}
    assert set(props["colocated_types"]["items"]["properties"]) == {f.name for f in COLOCATED_TYPE_FIELDS}
    assert set(props["entities"]["additionalProperties"]["properties"]) == {f.name for f in ENTITY_FIELDS}
    assert s["additionalProperties"] is False and "$ref" not in json.dumps(s)
    # every field in the table parses (accepted), a key beside them is refused
    d = base()
    d["jobs"][0].update({f.name: f.default for f in JOB_FIELDS if f.default is not None})
    Problem.from_dict(d)


def test_docs_publish_the_generated_schema_and_table() -> None:
    text = (DOCS / "schema.md").read_text()
    assert schema_table() in text, "docs/schema.md: regenerate the field table (policyopt.schema.schema_table())"
    m = re.search(r"<!-- json-schema -->\s*```json\n(.*?)```", text, re.S)
    assert m, "docs/schema.md must publish the JSON Schema in a ```json block after <!-- json-schema -->"
    assert json.loads(m.group(1)) == problem_json_schema()
    lo, hi = MAGNITUDE
    assert f"[{lo:g}, {hi:g}]" in text

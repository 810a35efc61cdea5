"""An op-table fuzzer: each op that takes an integer argument, fed valid and bad values (negative, just
past the end, far past, wrong lengths, zero), against TensorFlow, eagerly and under ``jta.checked``.

``specs.SPECS`` is the table (one :class:`~tests.helpers.opfuzz.engine.Spec` per op and integer
argument); :func:`run_spec` runs a spec's cells in this process: each value as a run-time argument (the
function imported once per shape, with the shape's first value as its example: a value baked into the
import shows) and as a constant in the function's body (imported once per value), each compared with
TensorFlow by :func:`~tests.helpers.opfuzz.engine.classify`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .engine import GraphProgram, Spec, build, classify, jta_call, tf_outcome

MODES = ("arg", "const")


def cell_id(spec: Spec, k: int, mode: str) -> str:
    return f"{spec.name}#{k}" if mode == "arg" else f"{spec.name}#c{k}"


def run_spec(spec: Spec, tf: Any, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, str, str, str]]:
    """``(cell id, eager kind, checked kind, detail)`` for each cell of ``spec`` not in ``skip`` (the
    cells where TensorFlow aborts the process). Kinds: ``SAME``, ``REFUSED``, ``TF_TRACE`` (TensorFlow
    rejects the value while tracing: nothing to compare), or a mismatch (``SILENT_VALUE``, ...)."""
    import jax

    import jta

    groups: dict[Any, dict[str, Any]] = {}
    fixed = [np.asarray(a) for a in spec.args.values()]
    for mode in MODES:
        for k, value in enumerate(spec.values):
            cid = cell_id(spec, k, mode)
            if cid in skip:
                continue
            v = np.asarray(value)
            key = (mode, k) if mode == "const" else ("dyn" if spec.dyn else v.shape)
            call = fixed if mode == "const" else [*fixed, v]
            if key not in groups:
                groups[key] = _group(spec, tf, jax, jta, v, mode, call)
            group = groups[key]
            if "trace_error" in group:
                yield cid, "TF_TRACE", "TF_TRACE", ""
                continue
            want = tf_outcome(group["f"], call)
            if "import_error" in group:
                kind, detail = classify(want, ("error", *group["import_error"]), spec.shape_only)
                kind = "REFUSED" if kind == "REFUSED" else kind if mode == "const" else "IMPORT_ERROR"
                yield cid, kind, kind, detail
                continue
            kinds = [classify(want, jta_call(fn, group["params"], call), spec.shape_only)
                     for fn in (group["jax_fn"], group["checked"])]
            yield cid, kinds[0][0], kinds[1][0], kinds[0][1] or kinds[1][1]


def _group(spec: Spec, tf: Any, jax: Any, jta: Any, v: np.ndarray, mode: str, call: list[Any]) -> dict[str, Any]:
    """A spec's TF function for a value's shape (or, as a constant, for the value) and its import."""
    const = v if mode == "const" else None
    group: dict[str, Any] = {}
    try:
        if spec.route == "graph":
            program = GraphProgram(spec, tf, v.shape, spec.dyn, const)
            group["f"] = lambda *a: program.tf_call(list(a))
        else:
            group["f"] = build(spec, tf, v.shape, spec.dyn, const)
            group["f"].get_concrete_function()
    except Exception:  # noqa: BLE001 - TensorFlow refuses this shape or value while tracing
        group["trace_error"] = True
        return group
    try:
        if spec.route == "graph":
            imported = jta.import_graph_def(program.graph.as_graph_def(), program.inputs, program.outputs)
            checked = jta.checked(jax.jit(imported))
            group.update(jax_fn=lambda p, *a: imported(*a), checked=lambda p, *a: checked(*a), params=None)
        else:
            group["jax_fn"], group["params"] = jta.import_function(group["f"], *call)
            group["checked"] = jta.checked(jax.jit(group["jax_fn"]))
    except Exception as e:  # noqa: BLE001 - compared with TensorFlow's outcome
        group["import_error"] = (type(e).__name__, str(e))
    return group

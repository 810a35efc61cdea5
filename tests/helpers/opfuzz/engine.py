"""The op-table fuzzer's machinery: build a cell's tf.function, run TF and jta on it, classify.

A spec (see specs.py) is one program ``def fn(<args>): return <expr>`` whose integer argument
``fuzz`` is a run-time argument (a traced placeholder); every value in ``values`` is one cell.
TF's outcome is the reference; jta runs the same tf.function imported with
``jta.import_function`` eagerly and under ``jta.checked(jax.jit(jf))``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

TF_PREFIX = re.compile(r"^\{\{function_node [^}]*\}\}\s*")


@dataclasses.dataclass
class Spec:
    name: str                 # unique id
    ops: tuple                # the TF op types it targets
    role: str                 # what the fuzzed integer is (axis, index, size, ...)
    expr: str                 # the function body's returned expression
    args: dict                # fixed arguments: name -> np array (run-time arguments too)
    fuzz: str                 # the fuzzed argument's name
    values: list              # its values (np arrays); the first of each shape is the import example
    setup: str = ""           # module-level code run before the function is built (variables)
    shape_only: bool = False  # compare shapes only (random ops)
    dyn: bool = False         # the fuzzed argument's spec has unknown dims (wrong lengths reach the kernel)
    route: str = "tf2"        # "tf2": jta.import_function; "graph": a TF1 tf.Graph through jta.import_graph_def

    def arg_names(self) -> list:
        return [*self.args, self.fuzz]


def tf_text(e: BaseException) -> str:
    s = str(e)
    s = TF_PREFIX.sub("", s)
    return s


def tf_essential(s: str) -> str:
    """TF's own message: without the function-node prefix, the 'Detected at node' traceback and the
    node/op suffix."""
    s = TF_PREFIX.sub("", s)
    if s.startswith("Graph execution error:"):
        keep = [ln for ln in s.split("\n")[1:] if ln.strip() and not ln.startswith("Detected at node")
                and not ln.startswith("  ") and ln.strip() != "<stack traces unavailable>"]
        s = "\n".join(keep) if keep else s
    s = re.sub(r"^Node: '[^']*'\n", "", s)
    s = s.split("\n\t [[")[0]
    s = re.sub(r"\s*\[Op:[^\]]*\]\s*$", "", s)
    return s.strip()


def first_line(s: str) -> str:
    s = s.strip()
    return s.split("\n")[0][:300]


def function_source(spec: Spec, const: Any = None) -> str:
    """``def fn(...)``: the fuzzed value an argument, or (``const``) a constant in the body."""
    body = spec.expr if "\n" in spec.expr else f"return {spec.expr}"
    body = "".join(f"    {ln}\n" for ln in body.split("\n"))
    if const is None:
        return f"def fn({', '.join(spec.arg_names())}):\n{body}"
    c = np.asarray(const)
    return (f"def fn({', '.join(spec.args)}):\n    {spec.fuzz} = tf.constant(np.array({c.tolist()!r}, np.{c.dtype}))\n"
            f"{body}")


def build(spec: Spec, tf: Any, fuzz_shape: Any, dyn: bool, const: Any = None) -> Any:
    ns: dict[str, Any] = {"tf": tf, "np": np}
    if spec.setup:
        exec(spec.setup, ns)  # noqa: S102 - our own specs
    exec(function_source(spec, const), ns)  # noqa: S102
    sig = [tf.TensorSpec(np.shape(v), tf.as_dtype(np.asarray(v).dtype)) for v in spec.args.values()]
    if const is not None:
        return tf.function(ns["fn"], input_signature=sig)
    fv = np.asarray(spec.values[0])
    shape = [None] * len(fuzz_shape) if dyn else list(fuzz_shape)
    sig.append(tf.TensorSpec(shape, tf.as_dtype(fv.dtype)))
    return tf.function(ns["fn"], input_signature=sig)


def leaves_np(out: Any) -> list:
    import jax
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def tf_outcome(f: Any, args: list) -> tuple:
    try:
        out = f(*args)
    except Exception as e:  # noqa: BLE001
        return ("error", type(e).__name__, tf_text(e))
    import tensorflow as tf
    out = tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t), out)
    return ("ok", leaves_np(out))


def jta_call(g: Any, params: Any, args: list) -> tuple:
    try:
        out = g(params, *args)
        return ("ok", leaves_np(out))
    except Exception as e:  # noqa: BLE001
        return ("error", type(e).__name__, str(e))


def same_values(a: list, b: list, shape_only: bool) -> tuple[bool, str]:
    if len(a) != len(b):
        return False, f"{len(b)} outputs, TF {len(a)}"
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape:
            return False, f"output {k} shape {y.shape}, TF {x.shape}"
        if shape_only:
            continue
        if x.dtype == object or y.dtype == object:
            if not np.array_equal(x, y):
                return False, f"output {k} differs"
            continue
        if np.issubdtype(x.dtype, np.inexact) or np.issubdtype(y.dtype, np.inexact):
            if not np.allclose(x.astype(np.complex128) if np.iscomplexobj(x) else x.astype(np.float64),
                               y.astype(np.complex128) if np.iscomplexobj(y) else y.astype(np.float64),
                               rtol=1e-5, atol=1e-5, equal_nan=True):
                return False, f"output {k} values differ"
        elif not np.array_equal(x.astype(np.int64) if x.dtype != bool else x, y.astype(np.int64) if y.dtype != bool else y):
            return False, f"output {k} values differ"
    return True, ""


def jta_essential(msg: str) -> str:
    m = re.match(r"^Node [^\n]*?\(\w+\): ", msg)
    return msg[m.end():] if m else msg


REFUSAL_WORDS = ("must be static", "cannot run this graph", "not supported", "unsupported", "cannot")


def classify(want: tuple, got: tuple, shape_only: bool) -> tuple[str, str]:
    """(kind, detail): SAME, SILENT_VALUE, VALUE_DIFF, SPURIOUS_ERROR, CLASS_DIFF, TEXT_DIFF,
    REFUSED (jta UnimplementedError where TF did not raise one), INTERNAL (jta's 'failed inside')."""
    if got[0] == "error":
        if "must be static (computable" in got[2]:
            return "REFUSED", first_line(got[2])
        if "failed inside with" in got[2]:
            return "INTERNAL", first_line(got[2])
        if got[1] == "UnimplementedError" and not (want[0] == "error" and want[1] == "UnimplementedError"):
            return "REFUSED", first_line(got[2])
    if want[0] == "ok" and got[0] == "ok":
        ok, why = same_values(want[1], got[1], shape_only)
        return ("SAME", "") if ok else ("VALUE_DIFF", why)
    if want[0] == "error" and got[0] == "ok":
        return "SILENT_VALUE", "jta returned " + summarize_value(got[1])
    if want[0] == "ok" and got[0] == "error":
        return "SPURIOUS_ERROR", f"{got[1]}: {first_line(got[2])}"
    if want[1] != got[1]:
        return "CLASS_DIFF", f"{got[1]}: {first_line(got[2])}"
    ess = _names(jta_essential(got[2]).strip())
    if ess and ess in _names(want[2]):
        return "SAME", ""
    return "TEXT_DIFF", f"{got[1]}: {first_line(got[2])}"


def _names(s: str) -> str:
    """A TF1 TensorArray's resource name carries a per-process counter (TensorArrayV3_12): not compared."""
    return re.sub(r"(TensorArray\w*?)_\d+:", r"\1_N:", s)


def summarize_value(vals: list) -> str:
    parts = []
    for v in vals[:3]:
        s = np.array2string(v, threshold=12, max_line_width=200).replace("\n", " ")
        parts.append(f"{s[:160]} (shape {v.shape})")
    return "; ".join(parts)


def outcome_text(o: tuple) -> str:
    if o[0] == "ok":
        return "value " + summarize_value(o[1])
    return f"{o[1]}: {first_line(tf_essential(o[2]))}"


class GraphProgram:
    """A TF1 graph of a spec: ``tf_call(args)`` runs it in a Session; ``jta_fn`` is jta.import_graph_def's."""

    def __init__(self, spec: Spec, tf: Any, fuzz_shape: Any, dyn: bool, const: Any = None) -> None:
        ns: dict[str, Any] = {"tf": tf, "np": np}
        exec(function_source(spec, const), ns)  # noqa: S102
        g = tf.Graph()
        with g.as_default():
            phs = [tf.compat.v1.placeholder(tf.as_dtype(np.asarray(v).dtype), np.shape(v), name=n)
                   for n, v in spec.args.items()]
            if const is None:
                fv = np.asarray(spec.values[0])
                shape = [None] * len(fuzz_shape) if dyn else list(fuzz_shape)
                phs.append(tf.compat.v1.placeholder(tf.as_dtype(fv.dtype), shape, name=spec.fuzz))
            out = ns["fn"](*phs)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
        self.graph, self.phs, self.outs = g, phs, outs
        self.inputs = [p.name for p in phs]
        self.outputs = [o.name for o in outs]
        self.graph_ops = sorted({op.type for op in g.get_operations()})
        self.sess = tf.compat.v1.Session(graph=g)

    def tf_call(self, args: list) -> list:
        return self.sess.run(self.outs, feed_dict=dict(zip(self.phs, args, strict=True)))

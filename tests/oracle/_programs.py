"""Random differential programs of raw TensorArray ops: generator, interpreters, comparators.

A *program* is a list of op records, plain dicts such as
``{"op": "write", "h": 0, "index": 1, "value": ("v", (2,), "float32", 3)}``, so a failing program
prints as Python that can be pasted into a regression test. Handles are positions ``h`` in the
list of handles the program has produced so far (each ``create``, ``grad`` and ``grad_shape``
appends one). Values are ``("v", shape, dtype, k)``: a deterministic tensor (see :func:`value`)
whose float entries are multiples of 0.5, so sums are exact and outputs can be compared exactly.

Three interpreters run a program: :func:`run_tf` (``tf.raw_ops``, eager: mode K),
:func:`run_jta` (``jta.raw_ops``, eager, state threaded) and :func:`run_jta_jit` (``jta.raw_ops``
inside one ``jax.jit`` with the indices as traced arguments, then ``jta.throw``). Each stops at
the first error. :func:`compare` checks that two results agree op by op.

Record fields (``h`` is always a handle position):

* ``create``: ``size`` (int, or a list: a non-scalar size), ``dtype``, ``element_shape`` (None =
  unknown rank, else a list with None for unknown dims), ``dynamic_size``, ``clear_after_read``,
  ``identical_element_shapes``, ``name`` (``tensor_array_name``; "" = the default)
* ``write``: ``index`` (int, or a list: non-scalar), ``value``
* ``read``: ``index``, ``dtype``
* ``gather``: ``indices`` (list), ``dtype``, ``element_shape`` (attribute, as for create)
* ``scatter``: ``indices``, ``value``
* ``concat``: ``dtype``, ``element_shape_except0``
* ``split``: ``value``, ``lengths`` (list of ints)
* ``size``, ``close``: only ``h``
* ``grad``: ``source``; ``grad_shape``: ``prepend`` (list), ``source``
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from typing import Any, Optional

import numpy as np

# -- values -----------------------------------------------------------------------------------

WIDE = ("float64", "int64", "complex128")


def value(spec) -> np.ndarray:
    """The tensor a value record ``("v", shape, dtype, k)`` stands for."""
    _, shape, dtype, k = spec
    base = np.arange(math.prod(shape), dtype=np.float64) + k
    dt = np.dtype(dtype)
    if dt.kind == "c":
        out = base * 0.5 + 1j * (base % 3)
    elif dt.kind == "f":
        out = base * 0.5 - 1.0
    else:
        out = base - 2
    return np.asarray(out).reshape(tuple(shape)).astype(dt)


def _int32(x) -> np.ndarray:
    return np.asarray(x, np.int32)


def needs_x64(program) -> bool:
    """Whether ``program`` mentions a 64-bit dtype (jta then runs under ``jax.enable_x64``)."""
    def wide(rec):
        for key in ("dtype", "value"):
            v = rec.get(key)
            if key == "value" and v is not None:
                v = v[2]
            if v in WIDE:
                return True
        return False
    return any(wide(rec) for rec in program)


# -- results ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    """What one interpreter saw: outputs of the ops that succeeded, then the first error."""

    outputs: list = dataclasses.field(default_factory=list)  # per op: tuple of np arrays / strings
    error: Optional[tuple[str, str]] = None  # (class name, normalised text)
    error_at: Optional[int] = None  # position of the failing op
    hazard: Optional[str] = None  # "H1"/"H2": not sent to TF (it would kill the process)
    at_trace: bool = False  # jit: the error was raised while tracing (a static error)


def _normalise(msg: str, names: list[str]) -> str:
    """Strip TF's decorations and JAX's traceback note; replace runtime array names
    (``foo_17``, TF's process-wide counter; ``foo_0``, jta's per-state one) by ``foo#<k>``,
    ``k`` the array's position among the program's creations."""
    msg = re.sub(r"^\{\{function_node [^}]*\}\} ", "", msg)
    msg = re.sub(r" \[Op:\w+\]( name: .*)?$", "", msg, flags=re.S)
    msg = re.sub(r"\n-+\nFor simplicity, JAX has removed .*$", "", msg, flags=re.S)
    for k, name in sorted(enumerate(names), key=lambda kn: -len(kn[1])):
        base = name.rsplit("_", 1)[0]
        msg = re.sub(re.escape(name) + r"(?!\d)", f"{base}#{k}", msg)
    return msg


# -- the TensorFlow interpreter ---------------------------------------------------------------


def _tf_shape(tf, shape):
    return tf.TensorShape(None if shape is None else list(shape))


def run_tf(program) -> Result:
    """Run ``program`` on ``tf.raw_ops`` (eager: the C++ kernels, mode K).

    The two TF hazards are never executed: a concat of a gradient array whose forward was never
    split (H1, ``std::bad_alloc``) and a split with a negative length (H2, CHECK failure) abort
    the process. They are recorded as ``hazard`` instead, and jta must raise there.
    """
    import tensorflow as tf

    raw = tf.raw_ops
    res = Result()
    handles: list[Any] = []  # TF handle tensors
    owner: list[tuple[int, Optional[str]]] = []  # per handle: (forward creation k, source or None)
    names: list[str] = []  # runtime names of the forward arrays, by creation
    marked: dict[int, int] = {}  # forward k -> marked_size (set by a successful split)
    grad_marked: dict[tuple[int, str], int] = {}  # (forward k, source) -> marked_size at creation
    flow = np.float32(0.0)
    for pos, rec in enumerate(program):
        op, h = rec["op"], rec.get("h")
        try:
            if op == "create":
                handle, f = raw.TensorArrayV3(
                    size=_int32(rec["size"]), dtype=tf.as_dtype(rec["dtype"]),
                    element_shape=_tf_shape(tf, rec["element_shape"]), dynamic_size=rec["dynamic_size"],
                    clear_after_read=rec["clear_after_read"],
                    identical_element_shapes=rec["identical_element_shapes"], tensor_array_name=rec["name"])
                names.append(re.search(r'name="_tensor_arrays([^"]*)"', repr(handle)).group(1))
                owner.append((len(names) - 1, None))
                handles.append(handle)
                out: tuple = (f.numpy(),)
            elif op == "write":
                out = (raw.TensorArrayWriteV3(handle=handles[h], index=_int32(rec["index"]),
                                              value=value(rec["value"]), flow_in=flow).numpy(),)
            elif op == "read":
                out = (raw.TensorArrayReadV3(handle=handles[h], index=_int32(rec["index"]), flow_in=flow,
                                             dtype=tf.as_dtype(rec["dtype"])).numpy(),)
            elif op == "gather":
                out = (raw.TensorArrayGatherV3(handle=handles[h], indices=_int32(rec["indices"]), flow_in=flow,
                                               dtype=tf.as_dtype(rec["dtype"]),
                                               element_shape=_tf_shape(tf, rec["element_shape"])).numpy(),)
            elif op == "scatter":
                out = (raw.TensorArrayScatterV3(handle=handles[h], indices=_int32(rec["indices"]),
                                                value=value(rec["value"]), flow_in=flow).numpy(),)
            elif op == "concat":
                k, source = owner[h]
                if source is not None and grad_marked[(k, source)] < 0:
                    res.hazard, res.error_at = "H1", pos
                    return res
                v, lengths = raw.TensorArrayConcatV3(
                    handle=handles[h], flow_in=flow, dtype=tf.as_dtype(rec["dtype"]),
                    element_shape_except0=_tf_shape(tf, rec["element_shape_except0"]))
                out = (v.numpy(), lengths.numpy())
            elif op == "split":
                if np.any(np.asarray(rec["lengths"]) < 0):
                    res.hazard, res.error_at = "H2", pos
                    return res
                out = (raw.TensorArraySplitV3(handle=handles[h], value=value(rec["value"]),
                                              lengths=np.asarray(rec["lengths"], np.int64),
                                              flow_in=flow).numpy(),)
                k, source = owner[h]
                if source is None:
                    marked[k] = len(rec["lengths"])
            elif op == "size":
                out = (raw.TensorArraySizeV3(handle=handles[h], flow_in=flow).numpy(),)
            elif op == "close":
                raw.TensorArrayCloseV3(handle=handles[h])
                out = ()
            elif op in ("grad", "grad_shape"):
                if op == "grad":
                    g, f = raw.TensorArrayGradV3(handle=handles[h], flow_in=flow, source=rec["source"])
                else:
                    g, f = raw.TensorArrayGradWithShape(handle=handles[h], flow_in=flow,
                                                        shape_to_prepend=_int32(rec["prepend"]),
                                                        source=rec["source"])
                k = owner[h][0]
                grad_marked.setdefault((k, rec["source"]), marked.get(k, -1))
                owner.append((k, rec["source"]))
                handles.append(g)
                gname = re.search(r'name="_tensor_array_grads([^"]*)"', repr(g)).group(1)
                out = (_normalise(gname, names), f.numpy())
            else:
                raise AssertionError(op)
        except tf.errors.OpError as e:
            res.error, res.error_at = (type(e).__name__, _normalise(e.message, names)), pos
            break
        res.outputs.append(out)
    for handle in handles:  # free the kernels' buffers (the resources stay registered)
        with contextlib.suppress(tf.errors.OpError):
            raw.TensorArrayCloseV3(handle=handle)
    return res


# -- the jta interpreters ---------------------------------------------------------------------

# Fields holding indices (traced under jit), in the order the interpreter asks for them.
_INDEX_FIELDS = {"write": "index", "read": "index", "gather": "indices", "scatter": "indices"}


def jit_eligible(program) -> bool:
    """Programs whose arrays all have fully known element shapes and a fixed size: their ops
    take traced indices (dense storage; a ``dynamic_size`` array would need a ``capacity``)."""
    for rec in program:
        if rec["op"] == "create":
            es = rec["element_shape"]
            if es is None or any(d is None for d in es) or rec["dynamic_size"]:
                return False
    return True


def traced_positions(program) -> set[int]:
    """Ops whose index field is passed as a traced argument under jit: all of them, except reads
    and gathers of a gradient array past its current size. (Eagerly such a read grows the array,
    TF's behaviour; at a traced index jta cannot grow a statically sized buffer and reports
    "beyond the static capacity" instead: documented, README "Sizes are static unless ...".)"""
    keys = _handle_keys(program)
    sizes: dict[tuple, Optional[int]] = {}  # (forward, source or None) -> current size
    out = set()
    n_created = 0
    for pos, rec in enumerate(program):
        op, h = rec["op"], rec.get("h")
        if op == "create":
            sizes[(n_created, None)] = rec["size"] if isinstance(rec["size"], int) else None
            n_created += 1
            continue
        if op in ("grad", "grad_shape"):
            key = (keys[h][0], rec["source"])
            sizes.setdefault(key, sizes.get((keys[h][0], None)))
            continue
        field = _INDEX_FIELDS.get(op)
        if field is None:
            continue
        key = keys[h]
        idx = np.asarray(rec[field]).reshape(-1)
        if key[1] is not None and op in ("read", "gather"):
            size = sizes.get(key)
            if size is None or (idx.size and int(idx.max()) >= size):
                if size is not None:  # grows (statically: eager and jit agree); keep it static
                    sizes[key] = int(idx.max()) + 1
                continue
        out.add(pos)
    return out


def _handle_keys(program):
    """Per handle position: (forward creation number, source or None)."""
    keys: list[tuple[int, Optional[str]]] = []
    n_created = 0
    for rec in program:
        if rec["op"] == "create":
            keys.append((n_created, None))
            n_created += 1
        elif rec["op"] in ("grad", "grad_shape"):
            keys.append((keys[rec["h"]][0], rec["source"]))
    return keys


def _jta_error(e: BaseException, names: list[str]) -> tuple[str, str]:
    return type(e).__name__, _normalise(str(e), names)


def _execute_jta(program, indices, out_names: list[str]) -> tuple[Any, list, Optional[BaseException], int]:
    """Run ``program`` on ``jta.raw_ops``; ``indices(pos, raw)`` supplies each index field.
    Returns ``(state, outputs, error, position)``."""
    from jta import raw_ops as ops

    state = ops.new_state()
    handles: list[str] = []
    outputs: list = []
    flow = np.float32(0.0)
    for pos, rec in enumerate(program):
        op, h = rec["op"], rec.get("h")
        handle = handles[h] if h is not None else None
        try:
            if op == "create":
                size = rec["size"] if isinstance(rec["size"], int) else _int32(rec["size"])
                es = rec["element_shape"]
                state, handle, f = ops.TensorArrayV3(
                    state, size, rec["dtype"], element_shape=None if es is None else tuple(es),
                    dynamic_size=rec["dynamic_size"], clear_after_read=rec["clear_after_read"],
                    identical_element_shapes=rec["identical_element_shapes"], tensor_array_name=rec["name"])
                handles.append(handle)
                out_names.append(handle)
                out: tuple = (f,)
            elif op == "write":
                state, f = ops.TensorArrayWriteV3(state, handle, indices(pos, rec["index"]),
                                                  value(rec["value"]), flow)
                out = (f,)
            elif op == "read":
                state, v = ops.TensorArrayReadV3(state, handle, indices(pos, rec["index"]), flow, rec["dtype"])
                out = (v,)
            elif op == "gather":
                es = rec["element_shape"]
                state, v = ops.TensorArrayGatherV3(state, handle, indices(pos, rec["indices"]), flow,
                                                   rec["dtype"], element_shape=None if es is None else tuple(es))
                out = (v,)
            elif op == "scatter":
                state, f = ops.TensorArrayScatterV3(state, handle, indices(pos, rec["indices"]),
                                                    value(rec["value"]), flow)
                out = (f,)
            elif op == "concat":
                es = rec["element_shape_except0"]
                state, v, lengths = ops.TensorArrayConcatV3(state, handle, flow, rec["dtype"],
                                                            None if es is None else tuple(es))
                out = (v, lengths)
            elif op == "split":
                state, f = ops.TensorArraySplitV3(state, handle, value(rec["value"]),
                                                  np.asarray(rec["lengths"], np.int64), flow)
                out = (f,)
            elif op == "size":
                state, s = ops.TensorArraySizeV3(state, handle, flow)
                out = (s,)
            elif op == "close":
                state = ops.TensorArrayCloseV3(state, handle)
                out = ()
            elif op in ("grad", "grad_shape"):
                if op == "grad":
                    state, g, f = ops.TensorArrayGradV3(state, handle, flow, rec["source"])
                else:
                    state, g, f = ops.TensorArrayGradWithShape(state, handle, flow, _int32(rec["prepend"]),
                                                               rec["source"])
                handles.append(g)
                out = (g, f)
            else:
                raise AssertionError(op)
        except Exception as e:  # noqa: BLE001 - any exception is compared with TF's
            return state, outputs, e, pos
        outputs.append(out)
    return state, outputs, None, len(program)


def _x64(program):
    import jax

    return jax.enable_x64(True) if needs_x64(program) else contextlib.nullcontext()


def _np_outputs(outputs, names):
    return [tuple(_normalise(o, names) if isinstance(o, str) else np.asarray(o) for o in out)
            for out in outputs]


def run_jta(program) -> Result:
    """Run ``program`` on ``jta.raw_ops`` eagerly, one explicit state threaded through."""
    names: list[str] = []
    with _x64(program):
        _, outputs, err, pos = _execute_jta(program, lambda pos, raw: _int32(raw), names)
        res = Result(outputs=_np_outputs(outputs, names))
    if err is not None:
        res.error, res.error_at = _jta_error(err, names), pos
    return res


def run_jta_jit(program, stop: Optional[int] = None) -> Result:
    """Run ``program[:stop + 1]`` on ``jta.raw_ops`` inside one ``jax.jit``: index fields are traced
    arguments (see :func:`traced_positions`), sizes, shapes, values and dtypes static. Errors
    found at traced values are recorded in the state and raised by ``jta.throw`` afterwards.

    ``stop`` is where eager jta failed: the jitted program ends there, since inside ``jit`` later
    ops would run on (and might record errors in) other arrays."""
    import jax

    import jta

    prog = program if stop is None else program[:stop + 1]
    traced = sorted(traced_positions(prog))
    _fields = {pos: _INDEX_FIELDS[prog[pos]["op"]] for pos in traced}
    args = [_int32(prog[pos][_fields[pos]]) for pos in traced]
    names: list[str] = []
    box: dict[str, Any] = {}

    def fn(*traced_args):
        names.clear()
        lookup = dict(zip(traced, traced_args, strict=True))
        state, outputs, err, pos = _execute_jta(
            prog, lambda pos, raw: lookup[pos] if pos in lookup else _int32(raw), names)
        box["err"], box["pos"] = err, pos
        if err is not None:  # a static error: raise it at trace time, as jta does
            raise err
        # handles (strings) are static: keep them out of the traced outputs
        box["handles"] = [[o for o in out if isinstance(o, str)] for out in outputs]
        return state, [[o for o in out if not isinstance(o, str)] for out in outputs]

    res = Result()
    with _x64(program):
        try:
            state, outputs = jax.block_until_ready(jax.jit(fn)(*args))
        except jax.errors.JaxRuntimeError:  # a value op's check raised when it ran
            taken = _taken_error()
            if taken is None:
                raise
            res.error, res.error_at = _jta_error(taken, names), len(prog) - 1
            return res
        except Exception as e:  # noqa: BLE001
            res.error, res.error_at, res.at_trace = _jta_error(e, names), box.get("pos"), True
            return res
        merged = []
        for strs, arrays in zip(box["handles"], outputs, strict=True):
            it_s, it_a = iter(strs), iter(arrays)
            merged.append(tuple(next(it_s) if _is_handle_out(k, len(strs)) else next(it_a)
                                for k in range(len(strs) + len(arrays))))
        res.outputs = _np_outputs(merged, names)
        try:
            jta.throw(state)
        except Exception as e:  # noqa: BLE001
            # the first recorded error: the last op of the (truncated) program
            res.error, res.error_at = _jta_error(e, names), len(prog) - 1
            res.outputs = res.outputs[:-1]
    return res


def _taken_error() -> Optional[Exception]:
    """What ``jta.throw()`` raises: the error a check in compiled code raised, if any."""
    import jta

    try:
        jta.throw()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def _is_handle_out(k: int, n_strings: int) -> bool:
    # grad ops return (handle, flow): the one string comes first
    return n_strings == 1 and k == 0


# -- comparison -------------------------------------------------------------------------------


def _same_array(a, b, lengths_dtype_loose=False) -> Optional[str]:
    if isinstance(a, str) or isinstance(b, str):
        return None if a == b else f"{a!r} != {b!r}"
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    if a.dtype != b.dtype and not (lengths_dtype_loose and a.dtype.kind == b.dtype.kind == "i"):
        return f"dtype {a.dtype} != {b.dtype}"
    if a.dtype.kind in "fc":
        ok = np.allclose(a, b, rtol=1e-6, atol=0, equal_nan=True)
    else:
        ok = np.array_equal(a, b)
    return None if ok else f"values\n{a}\n!=\n{b}"


def compare(ref: Result, got: Result, program) -> list[str]:
    """Differences between ``ref`` (TF, or eager jta) and ``got`` (jta); empty if they agree."""
    diffs = []
    wide = needs_x64(program)
    if ref.hazard:
        # TF would abort the process: jta must raise a clear error instead, at the same op.
        if got.error_at != ref.error_at or got.error is None or got.error[0] != "InvalidArgumentError":
            diffs.append(f"hazard {ref.hazard} at op {ref.error_at}: jta gave {got.error} at op {got.error_at}")
    elif (ref.error, ref.error_at) != (got.error, got.error_at):
        diffs.append(f"error: expected {ref.error} at op {ref.error_at}, got {got.error} at op {got.error_at}")
    n = min(len(ref.outputs), len(got.outputs))
    for pos in range(n):
        a, b = ref.outputs[pos], got.outputs[pos]
        if len(a) != len(b):
            diffs.append(f"op {pos} ({program[pos]['op']}): {len(a)} outputs vs {len(b)}")
            continue
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            # Concat's lengths are int64 in TF; jta's are int64 only under x64 (JAX's default int
            # is int32 otherwise).
            loose = program[pos]["op"] == "concat" and k == 1 and not wide
            d = _same_array(x, y, lengths_dtype_loose=loose)
            if d:
                diffs.append(f"op {pos} ({program[pos]['op']}) output {k}: {d}")
    return diffs


def _template_regex(template: str) -> str:
    parts = re.split(r"\{\w+\}", template)
    return "^" + ".*".join(re.escape(p) for p in parts) + "$"


def _value_dependent_texts() -> list[str]:
    from tests.helpers.internals import value_dependent_templates

    return [_template_regex(t) for t in value_dependent_templates()]


def is_value_dependent(error: Optional[tuple[str, str]]) -> bool:
    """Whether ``error`` is one jta records in the state at traced values (jta's value-dependent
    checks, see ``tests.helpers.internals.value_dependent_templates``)."""
    return error is not None and any(re.match(rx, error[1], re.S) for rx in _value_dependent_texts())


def compare_jit(eager: Result, jit: Result, program) -> tuple[list[str], bool]:
    """Differences between eager jta and jta under jit; also whether a documented difference was
    accepted (README "Errors inside jit": static problems raise at trace time, problems at traced
    values are recorded), at the failing op, when jit raised while tracing:

    * the static error names the index ``<traced>`` (its value is unknown while tracing), else
      the same class and text;
    * an op with both a problem at a traced value (an index) and a static one (a shape, a dtype)
      raises the static one while tracing, where eager code (TF's check order) may report the
      index first."""
    if (eager.error is not None and jit.error is not None and eager.error != jit.error
            and eager.error_at == jit.error_at and jit.at_trace):
        cls, text = jit.error
        # A static error found at a traced index names the index "<traced>" (unknown while tracing).
        index_unknown = "<traced>" in text and cls == eager.error[0] and re.fullmatch(
            re.escape(text).replace(re.escape("<traced>"), r"-?\d+"), eager.error[1], re.S)
        preempted = is_value_dependent(eager.error) and not is_value_dependent(jit.error)
        if index_unknown or preempted:
            return compare(dataclasses.replace(eager, error=jit.error), jit, program), True
    return compare(eager, jit, program), False


def format_program(program) -> str:
    return "[\n" + "".join(f"    {rec!r},\n" for rec in program) + "]"


# -- the generator ----------------------------------------------------------------------------

# Skewed draws (dtypes, dims, sizes): every new buffer shape costs jta's eager mode a few XLA
# compilations, so repeating the common ones keeps the default run inside its time budget.
DTYPES = ("float32",) * 9 + ("int32",) * 5 + ("float64", "int64", "complex64") * 2
OTHER_DTYPE = {"float32": "int32", "int32": "float32", "float64": "float32", "int64": "int32",
               "complex64": "float32"}
NAMES = ("foo", "bar", "foo", "")
SOURCES = ("gradients", "gradients_1", "src")


@dataclasses.dataclass
class _Arr:
    """The generator's model of one array (forward or accumulator); approximate by design."""

    dtype: str
    size: int
    dynamic: bool
    es: Optional[tuple]  # partial element shape
    fill: tuple  # a concrete shape compatible with es, for new values
    infer: bool
    car: bool
    grad: bool = False
    written: dict = dataclasses.field(default_factory=dict)  # index -> shape
    read: set = dataclasses.field(default_factory=set)
    closed: bool = False
    marked: int = -1
    fwd: Optional[int] = None  # accumulators: the forward's handle position
    grads: dict = dataclasses.field(default_factory=dict)  # forward: source -> _Arr

    def known(self) -> bool:
        return self.es is not None and all(d is not None for d in self.es)

    def proto(self) -> tuple:
        return tuple(self.es) if self.known() else self.fill

    def clears(self) -> bool:
        return self.car or self.grad

    def readable(self, i: int) -> bool:
        if i < 0 or (i >= self.size and not (self.grad and self.known())):
            return False
        if i in self.read and self.clears():
            return False
        return i in self.written or self.known()

    def shape_at(self, i: int) -> tuple:
        return tuple(self.written[i]) if i in self.written else self.proto()


def _compatible(es, shape) -> bool:
    return es is None or (len(es) == len(shape) and all(d is None or d == s for d, s in zip(es, shape, strict=True)))


class Generator:
    """Random programs from a seeded ``numpy.random.Generator``: ~80% of ops are meant to be
    valid under a simple model of the arrays, the rest invalid in one of the listed ways."""

    def __init__(self, seed: int, p_invalid: float = 0.15, jit_friendly: bool = False):
        self.rng = np.random.default_rng(seed)
        self.p_invalid = p_invalid
        self.jit_friendly = jit_friendly  # only fully known element shapes, no dynamic_size
        self.k = 0
        self.intended_invalid = 0
        self.generated = 0

    # helpers
    def _choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def _val(self, shape, dtype):
        self.k += 1
        return ("v", tuple(int(d) for d in shape), dtype, self.k % 7)

    def _shape(self, rank=None):
        rank = int(self.rng.choice([0, 1, 2], p=[0.25, 0.5, 0.25])) if rank is None else rank
        return tuple(int(d) for d in self.rng.choice([1, 2, 3], p=[0.2, 0.6, 0.2], size=rank))

    def _faults(self, options) -> list:
        """One fault, or (a quarter of the time) two, to exercise the kernels' check order."""
        faults = [self._choice(options)]
        if self.rng.random() < 0.25:
            faults.append(self._choice(options))
        # reshaping the indices (lengths) into a matrix last keeps the lists rectangular
        return sorted(faults, key=lambda f: f in ("matrix", "nonscalar"))

    def program(self) -> list:
        self.arrs: list[_Arr] = []  # per handle position (aliases share one _Arr)
        self.prog: list = []
        n_ops = int(self.rng.integers(3, 13))
        self._create()
        while len(self.prog) < n_ops:
            rec = self._op()
            if rec is not None:
                self.prog.append(rec)
        self.generated += len(self.prog)
        return self.prog

    def _op(self):
        invalid = self.rng.random() < self.p_invalid
        kinds = ["write"] * 20 + ["read"] * 12 + ["gather"] * 8 + ["scatter"] * 8 + ["concat"] * 6 + \
            ["split"] * 6 + ["size"] * 4 + ["close"] * 2 + ["grad"] * 6 + ["grad_shape"] * 3
        if sum(rec["op"] == "create" for rec in self.prog) < 2:
            kinds += ["create"] * 4
        kind = self._choice(kinds)
        if kind == "create":
            return self._create(invalid, append=False)
        live = [h for h, a in enumerate(self.arrs) if not a.closed]
        if invalid and self.rng.random() < 0.12:
            closed = [h for h, a in enumerate(self.arrs) if a.closed]
            if closed:  # use after close
                self.intended_invalid += 1
                h = self._choice(closed)  # (sometimes with a second fault: which is reported?)
                return self._finish(kind, h, invalid=self.rng.random() < 0.3) or {"op": "size", "h": h}
        if not live:
            return None
        h = self._choice(live)
        rec = self._finish(kind, h, invalid)
        if rec is not None and invalid:
            self.intended_invalid += 1
        return rec

    def _create(self, invalid=False, append=True):
        rng = self.rng
        dtype = self._choice(DTYPES)
        fill = self._shape()
        style = "known" if self.jit_friendly else self._choice(("known", "known", "partial", "unknown"))
        if style == "known" or not fill and style == "partial":
            es = fill
        elif style == "partial":
            es = tuple(None if rng.random() < 0.6 else d for d in fill)
            if all(d is not None for d in es):
                es = (None,) + es[1:]
        else:
            es = None
        size = int(rng.choice(5, p=[0.1, 0.15, 0.35, 0.25, 0.15]))
        rec = {"op": "create", "size": size, "dtype": dtype,
               "element_shape": None if es is None else list(es),
               "dynamic_size": bool(rng.random() < 0.3) and not self.jit_friendly,
               "clear_after_read": bool(rng.random() < 0.7),
               "identical_element_shapes": bool(rng.random() < 0.6), "name": self._choice(NAMES)}
        if invalid:
            rec["size"] = -1 if rng.random() < 0.6 else [size]
        arr = _Arr(dtype=dtype, size=size, dynamic=rec["dynamic_size"], es=es, fill=fill,
                   infer=rec["identical_element_shapes"], car=rec["clear_after_read"])
        self.arrs.append(arr)
        if append:
            self.prog.append(rec)
            return None
        return rec

    # -- per op ----------------------------------------------------------------------------
    def _finish(self, kind, h, invalid):
        return getattr(self, "_g_" + kind)(h, self.arrs[h], invalid)

    def _bad_index(self, a: _Arr, writes: bool) -> int:
        rng = self.rng
        if rng.random() < 0.3:
            return -int(rng.integers(1, 3))
        return a.size + int(rng.integers(0, 2)) if not (a.dynamic and writes) else -1

    def _value_shape_for_write(self, a: _Arr, i: int) -> tuple:
        shape = a.shape_at(i)
        if not a.infer and (a.es is None or (a.es and a.es[0] is None)) and shape and i not in a.written \
                and self.rng.random() < 0.3:
            shape = (int(self.rng.integers(1, 4)),) + tuple(shape[1:])  # ragged dim 0
        return shape

    def _wrong_shape(self, shape: tuple) -> tuple:
        if shape and self.rng.random() < 0.6:
            return (shape[0] + 1,) + tuple(shape[1:])
        return tuple(shape) + (2,)

    def _write_effect(self, a: _Arr, i: int, shape: tuple):
        if a.dynamic and i >= a.size:
            a.size = i + 1
        if a.infer and not a.known():
            a.es = tuple(shape)
        a.written.setdefault(i, tuple(shape))

    def _writable(self, a: _Arr) -> list[int]:
        top = a.size + (2 if a.dynamic else 0)
        return [i for i in range(top) if i not in a.read and (a.grad or i not in a.written)]

    def _g_write(self, h, a: _Arr, invalid):
        rng = self.rng
        cand = self._writable(a)
        if not invalid and not cand:
            return None
        i = self._choice(cand) if cand else 0
        shape = self._value_shape_for_write(a, i)
        dtype = a.dtype
        index: Any = i
        if invalid:
            for what in self._faults(("range", "range", "twice", "after_read", "shape", "dtype", "nonscalar")):
                if what == "range":
                    index = self._bad_index(a, writes=True)
                elif what == "twice" and a.written and not a.grad:
                    index = self._choice(sorted(a.written))
                elif what == "after_read" and a.read:
                    index = self._choice(sorted(a.read))
                elif what == "shape":
                    shape = self._wrong_shape(shape)
                elif what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                elif what == "nonscalar":
                    index = [i] if rng.random() < 0.5 else [i, i]
                else:
                    index = self._bad_index(a, writes=True)
        else:
            self._write_effect(a, i, shape)
        return {"op": "write", "h": h, "index": index, "value": self._val(shape, dtype)}

    def _g_read(self, h, a: _Arr, invalid):
        cand = [i for i in range(a.size + (2 if a.grad else 0)) if a.readable(i)]
        if not invalid and not cand:
            return None
        i: Any = self._choice(cand) if cand else 0
        dtype = a.dtype
        if invalid:
            for what in self._faults(("range", "range", "twice", "dtype", "unwritten", "nonscalar")):
                if what == "range":
                    i = self._bad_index(a, writes=False)
                elif what == "twice" and a.read:
                    i = self._choice(sorted(a.read))
                elif what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                elif what == "nonscalar":
                    i = [[i]]
                else:
                    unwritten = [j for j in range(a.size) if j not in a.written]
                    i = self._choice(unwritten) if unwritten else a.size + 1
        else:
            self._read_effect(a, [i])
        return {"op": "read", "h": h, "index": i, "dtype": dtype}

    def _read_effect(self, a: _Arr, idx):
        for i in idx:
            if a.grad and i >= a.size:
                a.size = i + 1
            a.written.setdefault(i, a.proto())
            a.read.add(i)

    def _attr(self, a: _Arr, es):
        r = self.rng.random()
        if r < 0.45 or es is None:
            return None
        if r < 0.85:
            return list(es)
        return [None] * len(es)

    def _g_gather(self, h, a: _Arr, invalid):
        rng = self.rng
        cand = [i for i in range(a.size) if a.readable(i)]
        if cand:
            k = int(rng.integers(1, min(3, len(cand)) + 1))
            idx = [int(i) for i in rng.choice(cand, size=k, replace=not a.clears())]
        else:
            idx = []
        shapes = {a.shape_at(i) for i in idx}
        if not invalid and len(shapes) > 1:
            idx = idx[:1]
        attr = self._attr(a, a.es)
        if not idx and not invalid and not (attr is not None and all(d is not None for d in attr)):
            attr = list(a.es) if a.known() else None
            if attr is None:
                return None
        dtype = a.dtype
        if invalid:
            for what in self._faults(("range", "twice", "dtype", "attr", "matrix", "empty")):
                if what == "range":
                    idx = idx + [self._bad_index(a, writes=False)]
                elif what == "twice" and idx:
                    idx = idx + [idx[0]]
                elif what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                elif what == "attr":
                    attr = list(self._wrong_shape(a.proto()))
                elif what == "matrix":
                    idx = [idx or [0]]
                else:
                    idx, attr = [], None if rng.random() < 0.5 else [None]
        else:
            if attr is not None and a.es is not None:
                a.es = tuple(x if x is not None else y for x, y in zip(a.es, attr, strict=True))
            self._read_effect(a, idx)
        return {"op": "gather", "h": h, "indices": idx, "dtype": dtype, "element_shape": attr}

    def _g_scatter(self, h, a: _Arr, invalid):
        rng = self.rng
        cand = [i for i in self._writable(a) if a.shape_at(i) == a.proto()]
        k = int(rng.integers(0 if rng.random() < 0.1 else 1, min(3, len(cand)) + 1)) if cand else 0
        idx = [int(i) for i in rng.choice(cand, size=k, replace=False)] if k else []
        shape = a.proto()
        dtype = a.dtype
        n_rows = len(idx)
        if invalid:
            for what in self._faults(("dup", "range", "neg", "count", "shape", "dtype", "scalar", "matrix")):
                if what == "dup" and idx:
                    idx = idx + [idx[0]]
                    n_rows += 1
                elif what == "range" or (what == "dup" and not idx):
                    idx = idx + [a.size + int(rng.integers(0, 2)) + (2 if a.dynamic else 0)]
                    n_rows += 1
                    if a.dynamic:
                        idx[-1] = -1
                elif what == "neg":
                    idx = idx + [-1]
                    n_rows += 1
                elif what == "count":
                    n_rows += 1
                elif what == "shape":
                    shape = self._wrong_shape(shape)
                elif what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                elif what == "scalar":
                    return {"op": "scatter", "h": h, "indices": idx, "value": self._val((), dtype)}
                else:
                    idx = [idx]
        else:
            for i in idx:
                self._write_effect(a, i, shape)
        return {"op": "scatter", "h": h, "indices": idx, "value": self._val((n_rows, *shape), dtype)}

    def _g_concat(self, h, a: _Arr, invalid):
        n = a.marked if a.grad else a.size
        dtype = a.dtype
        attr = None if a.es is None or not a.es or self.rng.random() < 0.5 else list(a.es[1:])
        if n < 0:  # H1: only as an intended invalid op
            if not invalid and self.rng.random() > 0.05:
                return None
            return {"op": "concat", "h": h, "dtype": dtype, "element_shape_except0": attr}
        ok = all(a.readable(i) for i in range(n))
        shapes = [a.shape_at(i) for i in range(n)]
        ok = ok and all(len(s) >= 1 for s in shapes) and len({s[1:] for s in shapes}) <= 1
        if n == 0 and not (attr is not None and all(d is not None for d in attr)):
            ok = ok and a.es is not None and len(a.es) >= 1 and all(d is not None for d in a.es[1:])
            attr = None if not ok else list(a.es[1:])
        if invalid:
            for what in self._faults(("dtype", "attr", "any")):
                if what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                elif what == "attr":
                    attr = [9] + ([] if not shapes or not shapes[0] else [None] * (len(shapes[0]) - 2))
        elif not ok:
            return None
        else:
            self._read_effect(a, range(n))
        return {"op": "concat", "h": h, "dtype": dtype, "element_shape_except0": attr}

    def _g_split(self, h, a: _Arr, invalid):
        rng = self.rng
        n = a.size + (int(rng.integers(0, 3)) if a.dynamic else 0)
        es = a.es
        rank = len(es) if es is not None else max(1, len(a.fill))
        fill = a.fill if len(a.fill) == rank else self._shape(rank)
        free = all(i not in a.written and i not in a.read for i in range(n)) or a.grad
        ok = rank >= 1 and free
        if es is not None and es and es[0] is not None:
            lengths = [int(es[0])] * n
        elif a.infer or (a.grad and a.written):
            d = int(rng.integers(1, 4))
            lengths = [d] * n
        else:
            lengths = [int(x) for x in rng.integers(0 if rng.random() < 0.2 else 1, 4, size=n)]
        if a.grad:
            ok = ok and all(a.shape_at(i) == (lengths[i], *fill[1:]) for i in range(n) if i in a.written)
        rest = tuple(d if d is not None else f for d, f in zip(es[1:], fill[1:], strict=True)) if es else \
            tuple(fill[1:])
        dtype = a.dtype
        rows = sum(lengths)
        vshape: tuple = (rows, *rest)
        if invalid:
            for what in self._faults(("sum", "count", "neg", "matrix", "scalar", "dtype", "shape")):
                if what == "sum":
                    vshape = (rows + 1, *rest)
                elif what == "count":
                    lengths = lengths + [0] if rng.random() < 0.5 or not lengths else lengths[:-1]
                    vshape = (sum(lengths), *rest)
                elif what == "neg":
                    lengths = lengths + [-1]
                    vshape = (sum(lengths), *rest)
                elif what == "matrix":
                    lengths = [lengths]
                elif what == "scalar":
                    vshape = ()
                elif what == "dtype":
                    dtype = OTHER_DTYPE[a.dtype]
                else:
                    vshape = (rows, *rest, 2)
        elif not ok:
            return None
        else:
            if a.dynamic and n > a.size:
                a.size = n
            for i in range(n):
                self._write_effect(a, i, (lengths[i], *rest))
            if not a.grad:
                a.marked = a.size
        return {"op": "split", "h": h, "value": self._val(vshape, dtype), "lengths": lengths}

    def _g_size(self, h, a: _Arr, invalid):
        return {"op": "size", "h": h}

    def _g_close(self, h, a: _Arr, invalid):
        if not invalid and len(self.prog) < 3:
            return None
        a.closed = True
        return {"op": "close", "h": h}

    def _g_grad(self, h, a: _Arr, invalid, prepend=None):
        source = self._choice(SOURCES)
        op = "grad" if prepend is None else "grad_shape"
        fh = h
        if a.grad:
            if not invalid and self.rng.random() > 0.1:  # gradient of a gradient: mostly avoid
                fh = a.fwd
            if fh is None:
                return None
        fa = self.arrs[fh]
        if fa.closed and not invalid:
            return None
        rec = {"op": op, "h": fh, "source": source}
        if prepend is not None:
            rec["prepend"] = prepend
        if fa.grad:
            self.arrs.append(fa)  # never used: the program fails here
            return rec
        fa.dynamic = False
        g = fa.grads.get(source)
        if g is None:
            pre = tuple(prepend or ())
            g = _Arr(dtype=fa.dtype, size=fa.size, dynamic=False,
                     es=None if fa.es is None else pre + tuple(fa.es), fill=pre + tuple(fa.fill),
                     infer=fa.infer, car=True, grad=True, marked=fa.marked, fwd=fh,
                     written={i: pre + tuple(s) for i, s in fa.written.items()})
            if fa.es is None and pre:
                g.fill = pre + tuple(fa.fill)
            fa.grads[source] = g
        self.arrs.append(g)
        return rec

    def _g_grad_shape(self, h, a: _Arr, invalid):
        prepend = [int(d) for d in self.rng.choice([1, 2], p=[0.3, 0.7], size=int(self.rng.choice(3, p=[0.3, 0.5, 0.2])))]
        return self._g_grad(h, a, invalid, prepend=prepend)


def generate(seed: int, n: int, stats: Optional[dict] = None, jit_friendly: bool = False) -> list[list]:
    """``n`` programs from ``seed``; ``stats`` (if given) gets the generator's op counts."""
    gen = Generator(seed, jit_friendly=jit_friendly)
    programs = [gen.program() for _ in range(n)]
    if stats is not None:
        stats.update(generated_ops=gen.generated, intended_invalid=gen.intended_invalid)
    return programs

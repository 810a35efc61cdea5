"""TF2 programs as JAX functions: :func:`import_function` and :func:`import_saved_model`.

The contract is tf2jax's (``jax_fn, params = import_function(fn, *example_args)``; then
``jax_fn(params, *args)``), so users of either know the other; the difference is underneath:
the function library runs natively (:mod:`jta.graph_import._functions`), loops become ``lax.scan``
or ``jta.while_loop`` so ``jax.grad`` reverses them (:mod:`jta.graph_import._tf2_loops`), and every
TensorList op runs (:mod:`jta.graph_import._lists`) — including the accumulators a
``tf.GradientTape`` inside the function adds, so a train step imports as well as its forward.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _list_vectors, _lists, _ops_linalg, _ops_nn, _ops_tf2jax, _tf2_loops  # noqa: F401 - they register ops
from ._functions import ASSIGN_OPS, CONTROL_OPS, Body, Evaluator, Library, Var, reached
from ._messages import GraphError
from ._nodes import parse, tensor_name
from ._ops import OPS, is_static
from ._ops_logging import SUMMARY_OPS, WRITER
from ._ops_lookup import CHANGING_OPS, captured_tables
from ._random_kernels import KERNEL_OPS, initial_state, key_of
from ._variable_names import captured_variables, params_keys

__all__ = ["import_function", "import_saved_model", "supported_tf2_ops"]


def supported_tf2_ops() -> list[str]:
    """Every op type :func:`import_function` runs, sorted.

    ```python
    >>> from jta.graph_import import supported_tf2_ops
    >>> "TensorListPushBack" in supported_tf2_ops() and "StatelessWhile" in supported_tf2_ops()
    True

    ```
    """
    return sorted({*OPS, *_lists.LIST_OPS, *CONTROL_OPS, *KERNEL_OPS})


def _concrete_function(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if hasattr(fn, "get_concrete_function"):
        return fn.get_concrete_function(*args, **kwargs)
    if hasattr(fn, "graph") and hasattr(fn, "structured_outputs"):
        return fn
    GraphError.TF2_SOURCE.raise_(given=f"{type(fn).__name__} {fn!r}"[:200])


def import_function(fn: Any, *example_args: Any, pad_stacks: bool = False, with_updates: bool = False,
                    **example_kwargs: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A ``tf.function`` (or a ``ConcreteFunction``) as a pure JAX function and its parameters.

    **Arguments:**

    - `fn`: a ``tf.function``, traced with the example arguments, or a ``ConcreteFunction``.
    - `example_args`, `example_kwargs`: what ``fn`` is traced with (arrays or ``tf.TensorSpec``).
    - `pad_stacks`: under ``jit`` or ``grad``, a list written in a loop whose trip count the data
      decides has a run-time length, and stacking it would need a shape JAX cannot give: by default
      that is refused; with ``pad_stacks=True`` the stack has the loop bound's rows, those past the
      length zeros, for the function's outputs and sums of it only (another use, a mean, a max, its
      last row, could see the zeros: refused, code 488). (Eager calls with concrete arguments run such
      loops step by step: exact shapes.)
    - `with_updates`: ``jax_fn`` returns ``(outputs, new_params)``, ``params`` with the values the
      function assigned its variables (a batch norm's moving statistics in training, a Keras 3 seed
      generator's state). Without it a function that assigns variables computes its outputs with them
      as TensorFlow does (a read after an assignment sees its value), returns the outputs alone, and
      the import warns that the new values are not returned.

    **Returns:** ``(jax_fn, params)``: ``params`` maps each captured variable's name (without
    ``:0``; a Keras 3 variable's ``path``) to its value; ``jax_fn(params, *args)`` (``args``: the
    nests ``fn`` takes, or their leaves) returns the nest ``fn(*args)`` returns, eagerly and under
    ``jit``, and is differentiable with respect to ``params`` and ``args``: loops are
    ``lax.scan`` (static or bounded trip count) or ``jta.while_loop``. A ``tf.GradientTape`` inside
    ``fn`` runs too (its gradient loops pop the accumulators of the forward ones). Every op the
    outputs need, in every function they reach, is checked first: one ``UnimplementedError`` lists
    the unsupported ones.

    ```python
    >>> import numpy as np, jax, tensorflow as tf, jta
    >>> w = tf.Variable(np.float32(2.0), name="w")
    >>> @tf.function
    ... def f(x):
    ...     return tf.reduce_sum(tf.map_fn(lambda r: tf.tanh(r * w), x))
    >>> jax_fn, params = jta.import_function(f, np.ones((3, 2), np.float32))
    >>> sorted(params)
    ['w']
    >>> bool(np.isclose(jax.jit(jax_fn)(params, np.ones((3, 2), np.float32)), f(np.ones((3, 2), np.float32))))
    True

    ```
    """
    try:
        import tensorflow as tf
    except ImportError as e:  # pragma: no cover - the extra is installed in the tests
        raise GraphError.NEEDS_TF.exception(error=str(e)) from e
    concrete = _concrete_function(fn, example_args, example_kwargs)
    roots = (fn,) if concrete is not fn else None  # (a ConcreteFunction keeps no Python function)
    return _import_concrete(concrete, tf, pad_stacks, with_updates, roots)


def _import_concrete(concrete: Any, tf: Any, pad_stacks: bool, with_updates: bool = False,
                     roots: Optional[tuple[Any, ...]] = None) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``concrete`` imported (``roots``: the Python objects it was traced from, which name its Keras 3
    variables: :mod:`._variable_names`)."""
    graph_def = concrete.graph.as_graph_def()
    nodes = parse(graph_def, tf)
    lib = Library(graph_def.library)
    by_handle = {id(v.handle): v for v in concrete.variables}
    captured = {id(ext): internal for ext, internal in concrete.graph.captures}
    # a resource the function does not list but reads as a variable (one a legacy optimizer made while traced;
    # not a lookup table or a summary writer, whose Python objects the walk must not touch)
    read = {source for node in nodes.values() if "Variable" in node.op or node.op.startswith("Resource")
            for source, _ in node.inputs}
    unlisted = {i for i, internal in captured.items() if i not in by_handle and internal.op.name in read}
    if unlisted:
        by_handle.update(captured_variables(unlisted, roots, tf.Variable))
    variables: dict[str, Any] = {}
    for ext_id, internal in captured.items():
        if ext_id in by_handle:
            variables[internal.op.name] = by_handle[ext_id]
    inputs = [t.op.name for t in concrete.inputs]
    n_args = len(inputs) - len(concrete.captured_inputs)
    leaves, treedef = jax.tree_util.tree_flatten(concrete.structured_outputs, is_leaf=lambda x: x is None)
    is_tensor = [isinstance(t, (tf.Tensor, tf.TensorSpec)) for t in leaves]
    # an IndexedSlices (the tape's gradient of a gather, an embedding's) is returned dense: its three tensors
    slices = [isinstance(t, tf.IndexedSlices) and t.dense_shape is not None for t in leaves]
    composite = [type(t).__name__ for t, ok, sl in zip(leaves, is_tensor, slices, strict=True)
                 if not ok and not sl and t is not None]
    if composite:
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - composite outputs ({', '.join(composite)}): return dense "
                                                "tensors (tf.convert_to_tensor of them)")
    # The structured outputs name their graph tensors; a loaded function's are specs, in the order of its
    # outputs (a forward a tape went through has more outputs: the accumulators its gradient pops).
    tensors = [part for t, ok, sl in zip(leaves, is_tensor, slices, strict=True)
               for part in ([t] if ok else [t.values, t.indices, t.dense_shape] if sl else [])]
    outputs = [tensor_name(t.name) for t in (tensors if all(isinstance(t, tf.Tensor) for t in tensors)
                                             else concrete.outputs[:len(tensors)])]
    top = Body("<top>", nodes, inputs, outputs)
    _check(lib, top)
    bodies = reached(lib, top)
    assigning = sorted({body.nodes[n].op for body in bodies for n in body.order
                        if body.nodes[n].op in ASSIGN_OPS or body.nodes[n].op in KERNEL_OPS})
    if assigning and not with_updates:
        warnings.warn(f"{_name(concrete)} assigns variables or steps random generators ({', '.join(assigning)}): the "
                      "imported function computes its outputs with the new values, as TensorFlow does, but "
                      "returns the outputs only (a random op draws the same values every call); pass "
                      "with_updates=True to get (outputs, new_params).", stacklevel=3)
    kernels = lib.kernels_in(top)
    attrs = getattr(getattr(concrete, "function_def", None), "attr", {})
    randomness = kernels or any("Random" in body.nodes[n].op for body in bodies for n in body.order)
    if randomness and "_XlaMustCompile" in attrs and attrs["_XlaMustCompile"].b:
        warnings.warn("the function is compiled by XLA in TensorFlow (jit_compile=True), whose random ops draw "
                      "XLA's values; the import draws those of TensorFlow's kernels (the same seeds give other "
                      "values).", stacklevel=3)
    names = params_keys(variables, roots)
    params = {names[n]: jnp.asarray(v.numpy()) for n, v in variables.items()}
    params.update({key_of([], k): jnp.asarray(initial_state(node)) for k, node in kernels.items()})
    # a captured eager tensor (a closure's tf.constant, a Keras 3 Normalization's adapted mean) is a constant
    constants = {internal.op.name: ext.numpy() for ext, internal in concrete.graph.captures
                 if id(ext) not in by_handle and hasattr(ext, "numpy") and ext.dtype.is_numpy_compatible}
    reached_ops = {body.nodes[n].op for body in bodies for n in body.order}
    # (tf.print prints as TensorFlow prints: ._ops_logging; no warning)
    writes = sorted(reached_ops & set(SUMMARY_OPS))
    if writes:
        warnings.warn(f"{_name(concrete)} writes summaries ({', '.join(writes)}): the imported function writes "
                      "none; return the values to log from the tf.function and log them from Python.",
                      stacklevel=3)
        # (a captured resource that is not a variable: the writer, which only the summary ops read)
        constants.update({internal.op.name: WRITER for ext, internal in concrete.graph.captures
                          if id(ext) not in by_handle and ext.dtype == tf.resource})
    # a captured lookup table (not a variable): its contents at import, integer keys (._ops_lookup)
    constants.update(captured_tables(lib, top, [(ext, internal.op.name) for ext, internal in concrete.graph.captures
                                                if id(ext) not in by_handle and ext.dtype == tf.resource], tf))
    handles = [Var(names[n]) if n in variables else constants.get(n) for n in inputs[n_args:]]
    for n, h in zip(inputs[n_args:], handles, strict=True):
        if h is None:
            GraphError.TF2_UNSUPPORTED.raise_(items=f"  - the captured value {n} is neither a variable nor a "
                                                    "tensor of known value (capture it as a tf.Variable or pass it "
                                                    "as an argument)")
    handles_by_id = {id(v.handle): Var(names[n]) for n, v in variables.items()}
    shapes = [None if t.shape.rank is None else tuple(t.shape.as_list()) for t in concrete.inputs[:n_args]]
    specs = [(t.dtype.as_numpy_dtype if t.dtype.is_numpy_compatible else None) for t in concrete.inputs[:n_args]]
    arg_text = ", ".join(inputs[:n_args])
    arg_names = _argument_names(concrete, n_args)
    nests = _positional_count(concrete)

    def jax_fn(params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if nests is not None and len(args) == nests != n_args:  # the nests fn takes (a dict of inputs), flattened
            args = tuple(jax.tree_util.tree_leaves(args))  # (in TensorFlow's order: dicts by sorted key)
        if kwargs:  # a signature's arguments by name, after any given by position
            rest = arg_names[len(args):]
            if set(kwargs) != set(rest):
                GraphError.TF2_ARGUMENTS.raise_(expected=n_args, names=arg_text, given=(
                    f"{len(args)} by position and {', '.join(sorted(kwargs))} by name"))
            args = args + tuple(kwargs[k] for k in rest)
        if len(args) != n_args:
            GraphError.TF2_ARGUMENTS.raise_(expected=n_args, names=arg_text, given=len(args))
        flat = [jnp.asarray(a, jax.dtypes.canonicalize_dtype(d)) if d is not None else a
                for a, d in zip(args, specs, strict=True)]
        for a, name, shape in zip(flat, inputs, shapes, strict=False):
            if shape is not None and (len(shape) != jnp.ndim(a) or any(
                    e is not None and e != d for d, e in zip(jnp.shape(a), shape, strict=True))):
                # the graph was traced for these shapes (Keras bakes static sizes into constants)
                GraphError.FEED_SHAPE.raise_(shape=tuple(jnp.shape(a)), tensor=f"{name}:0", expected=tuple(shape))
        # (a custom gradient's graph captures the variables' eager handles)
        ev = Evaluator(lib, dict(params), _tf2_loops.run, pad_stacks=pad_stacks, handles=handles_by_id)
        values = iter(ev.call(top, [*flat, *handles]))
        out = [next(values) if ok else _dense(next(values), next(values), next(values)) if sl else t
               for t, ok, sl in zip(leaves, is_tensor, slices, strict=True)]
        result = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(v) if isinstance(v, (np.ndarray, np.generic))
                                                        else v for v in out])
        return (result, {**params, **{k: ev.params[k] for k in ev.assigned}}) if with_updates else result

    jax_fn.__doc__ = f"The imported {concrete.name}: (params, {arg_text})."
    return jax_fn, params


def _dense(values: Any, indices: Any, dense_shape: Any) -> jax.Array:
    """An ``IndexedSlices`` as ``tf.convert_to_tensor`` gives it: the rows of ``values`` summed into
    zeros of ``dense_shape`` at ``indices`` (a repeated index sums its rows)."""
    if not is_static(dense_shape):
        GraphError.NOT_STATIC.raise_(node="(an output)", op="IndexedSlices", what="its dense_shape")
    shape = tuple(int(d) for d in np.asarray(dense_shape))
    return jnp.zeros(shape, jnp.asarray(values).dtype).at[indices].add(values)


def _name(concrete: Any) -> str:
    return concrete.name.decode() if isinstance(concrete.name, bytes) else str(concrete.name)


def _positional_count(concrete: Any) -> Optional[int]:
    """How many positional arguments the function takes, each a nest of tensors (None: unknown); a
    Python argument traced as a constant (a defaulted callable) is not one."""
    try:
        positional = concrete.structured_input_signature[0]
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - an old TensorFlow
        return None
    return sum(any(hasattr(leaf, "dtype") and hasattr(leaf, "shape") for leaf in jax.tree_util.tree_leaves(a))
               for a in positional)


def _argument_names(concrete: Any, n_args: int) -> list[str]:
    """The arguments' names in the order of the function's flat inputs (keywords are taken by name)."""
    try:
        spec_args, spec_kwargs = concrete.structured_input_signature
        names = [getattr(s, "name", None) or f"arg{k}" for k, s in enumerate(
            jax.tree_util.tree_leaves((spec_args, spec_kwargs)))]
        return names[:n_args]
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - an old TensorFlow
        return [f"arg{k}" for k in range(n_args)]


_ASSIGN = ("ResourceApplyGradientDescent", "ResourceApplyAdam", "ResourceApplyMomentum", "ResourceApplyKerasMomentum")
# Random ops whose streams are not reproduced (the stateless ones with explicit seeds run bit for bit,
# jta.graph_import._ops_random, and the stateful kernels of uniform/normal/gamma/Poisson draws, ._random_kernels)
_RANDOM = ("RandomGammaV2", "StatefulUniform", "StatefulUniformInt",
           "StatefulUniformFullInt", "StatefulStandardNormalV2", "StatefulTruncatedNormal",
           "RngSkip")

_V1_CONTROL_FLOW = ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "TensorArrayV3",
                    "TensorArrayWriteV3", "TensorArrayReadV3", "StackV2", "StackPushV2", "StackPopV2")


# The ways out of a refusal, by class of op: (title, a note on the ops, which ops, the way out)
_WAYS: tuple[tuple[str, str, Callable[[str], bool], str], ...] = (
    ("Optimizer updates", "", lambda op: op in _ASSIGN or op.startswith("ResourceApply"),
     "return the gradients from the tf.function instead of applying them, and apply the update in JAX (optax); "
     "plain assignments (assign, assign_add, assign_sub) run, with_updates=True returns their values."),
    ("Random numbers", "", lambda op: op in _RANDOM or "Random" in op or op.startswith(("Stateful", "Rng")),
     "jta draws TensorFlow's values for its stateless ops (tf.random.stateless_*, tf.random.split and fold_in) "
     "and for the stateful kernels of tf.random.uniform, normal, truncated_normal, categorical, shuffle, gamma "
     "and poisson (dropout, noise), not for other distributions (binomial, parameterized truncated normal): "
     "draw with the supported stateless ops from an "
     "explicit seed argument (e.g. seed + tf.stack([step, 0])), or pass the random values as arguments of the "
     "tf.function."),
    ("Control flow v1", "", lambda op: op in _V1_CONTROL_FLOW,
     "the function was traced after tf.compat.v1.disable_control_flow_v2(); trace it after "
     "tf.compat.v1.enable_control_flow_v2() (TF2's default), or import the TF1 graph with jta.import_graph_def."),
    ("Python callbacks", ": tf.py_function, tf.numpy_function",
     lambda op: op in ("EagerPyFunc", "PyFunc", "PyFuncStateless"),
     "their Python code is not in the graph; write it with TensorFlow ops, or run it outside the tf.function "
     "(or in JAX, jax.pure_callback) and pass its results as arguments."),
    ("tf.data", "", lambda op: "Dataset" in op or op.startswith(("Iterator", "AnonymousIterator")),
     "iterate the dataset outside the function and pass each batch as an argument."),
    ("Ragged values in a loop", ": tf.map_fn over a RaggedTensor's rows, or with fn_output_signature="
     "tf.RaggedTensorSpec", lambda op: op in ("RaggedTensorToVariant", "RaggedTensorFromVariant"),
     "map over the padded rows (rt.to_tensor()) with their lengths (rt.row_lengths()), and return each step's "
     "row padded to a static width, and its length, from map_fn's function (a fn_output_signature of "
     "tf.TensorSpec); mask the padding where the rows are used."),
    ("Strings", "", lambda op: op.startswith(("String", "Regex", "Substr", "Unicode")) or
     op in ("AsString", "DecodeRaw", "ParseExampleV2"),
     "JAX has no string arrays; tokenize outside the function and pass the ids as arguments."),
    ("Lookup tables", " (a table's insert, remove or initialization in the function)", lambda op: op in CHANGING_OPS,
     "jta reads the tables a function captures (integer keys), as they are at import, and does not change them: "
     "fill the table outside the tf.function."),
    ("Summaries", "", lambda op: "Summary" in op,
     "jta imports tf.summary's writes as no-ops (with a warning), not TF1's summary protos; return the values "
     "from the tf.function and log them from Python."),
)


def _check(lib: Library, top: Body) -> None:
    """One ``UnimplementedError`` listing every unsupported op of every function the outputs reach."""
    known = set(supported_tf2_ops())
    found: dict[str, list[str]] = {}
    for body in reached(lib, top):
        for n in body.order:
            op = body.nodes[n].op
            where = f"{body.name}/{n}" if body.name != "<top>" else n
            if op not in known and op not in lib:
                found.setdefault(op, []).append(where)
    if not found:
        return
    items = []
    for op, where in sorted(found.items()):
        more = f" and {len(where) - 3} more" if len(where) > 3 else ""
        items.append(f"  - op type {op} ({len(where)} node{'s' * (len(where) > 1)}: {', '.join(where[:3])}{more})")
    ways, rest = [], set(found)
    for title, note, matches, way in _WAYS:
        ops = sorted(op for op in found if matches(op))
        if ops:
            ways.append(f"{title} ({', '.join(ops)}{note}): {way}")
            rest -= set(ops)
    if rest:
        ways.append(f"Other op types ({', '.join(sorted(rest))}): jta.graph_import.supported_tf2_ops() lists what "
                    "runs; compute these outside the tf.function and pass the results as arguments, or please "
                    "report the op with the function.")
    GraphError.TF2_UNSUPPORTED.raise_(items="\n".join(items + ways))


def import_saved_model(path: str, name: str = "serving_default", *, pad_stacks: bool = False,
                       with_updates: bool = False) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A SavedModel's signature (or ``tf.function`` attribute) as a pure JAX function and its parameters.

    ``name`` is a signature key (the outputs are then the signature's dict and the arguments may be
    given by keyword) or the name of a ``tf.function`` attribute of the loaded object (with an
    input signature). Otherwise as :func:`import_function`.

    ```python
    >>> import tempfile, numpy as np, tensorflow as tf, jta
    >>> m = tf.Module()
    >>> m.w = tf.Variable(np.float32(3.0), name="w")
    >>> m.f = tf.function(lambda x: {"y": x * m.w}, input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
    >>> path = tempfile.mkdtemp()
    >>> tf.saved_model.save(m, path, signatures={"serving_default": m.f})
    >>> jax_fn, params = jta.import_saved_model(path)
    >>> jax_fn(params, x=np.ones(2, np.float32))["y"].tolist()
    [3.0, 3.0]

    ```
    """
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    if name in loaded.signatures:
        concrete = loaded.signatures[name]
    elif hasattr(loaded, name) and hasattr(getattr(loaded, name), "get_concrete_function"):
        concrete = getattr(loaded, name).get_concrete_function()
    else:
        GraphError.SIGNATURE.raise_(path=str(path), name=name, known=", ".join(sorted(loaded.signatures)) or "none")
    jax_fn, params = _import_concrete(concrete, tf, pad_stacks, with_updates, roots=())  # (restored variables)
    return jax_fn, params

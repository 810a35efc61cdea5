"""TF2 programs through ``jta.import_function`` / ``jta.import_saved_model``, against TensorFlow.

The eight programs of issue 28 (:mod:`tests.helpers.tf2_programs`): each forward ``tf.function`` and
its train step (a ``GradientTape`` inside the ``tf.function``: the tape's accumulator lists and
gradient loops) imported and compared with TensorFlow's own call, under ``jax.jit`` by default and
eagerly too under ``--long``; ``jax.grad`` of the imported forward against the tape's gradients.
Loops whose trip count the data decides (``early_exit``, ``greedy_decoder``) run step by step
eagerly (TensorFlow's shapes), and under ``jit`` either are refused at the stack (code 438) or,
with ``pad_stacks=True``, give the stack padded with zero rows.
"""

from __future__ import annotations

import functools
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta._records.catalogue import Error  # noqa: E402
from jta.graph_import import _custom_gradients, _functions, _lists, supported_tf2_ops  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget, tf2_programs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "_generated" / "tf2_ops.md"
COMMAND = "python -m tests.test_tf2_import"

DYNAMIC = ("early_exit", "greedy_decoder", "inner_bounded_growth", "minimum_bound",
           "bounded_read_grad", "seq2seq")  # the trip count is the data's


def _close(got: Any, want: Any, pad: bool = False) -> None:
    leaves, ref = jax.tree_util.tree_leaves(got), [np.asarray(x) for x in tf.nest.flatten(want)]
    assert len(leaves) == len(ref)
    for a, b in zip(leaves, ref, strict=True):
        a = np.asarray(a)
        if pad and a.ndim and a.shape != b.shape:  # a padded stack: TF's rows, then zeros
            np.testing.assert_array_equal(a[b.shape[0]:], 0)
            a = a[:b.shape[0]]
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def _key(v: Any) -> str:
    """A variable's params key: its name without ``:0`` (a Keras 3 variable's ``name`` is its last part)."""
    return getattr(v, "path", None) or v.name.removesuffix(":0")


def _loss(jax_fn: Any, args: tuple[Any, ...]) -> Any:
    def loss(params: dict[str, Any]) -> Any:
        outs = jax.tree_util.tree_leaves(jax_fn(params, *args))
        return sum(jnp.sum(jnp.square(o)) for o in outs if jnp.issubdtype(o.dtype, jnp.floating))
    return loss


@pytest.fixture(scope="module", params=[  # four by default (a loop, Keras, a decoder, list ops), all under --long
    name if name in ("autograph_loop", "greedy_decoder", "array_ops") else pytest.param(name, marks=pytest.mark.long_only)
    for name in tf2_programs.PROGRAMS])
def program(request: pytest.FixtureRequest) -> tf2_programs.Program:
    return tf2_programs.PROGRAMS[request.param]()


def test_forward_train_and_grad(program: tf2_programs.Program) -> None:
    """Values and train steps under jit (eagerly too under --long), jax.grad against the tape."""
    pad = program.name in DYNAMIC
    _check_program(program, ("jit", "eager", "checked") if budget.LONG or pad else ("jit",))


def _check_program(program: tf2_programs.Program, modes: tuple[str, ...]) -> None:
    """``modes``: ``jit``, ``eager``, ``checked`` (``jta.checked(jax.jit(fn))``, imported without
    ``pad_stacks``: TensorFlow's shapes, the lengths the data decides learned at run time)."""
    pad = program.name in DYNAMIC
    for kind in ("forward", "train"):
        fn = getattr(program, kind)
        want = fn(*program.args)
        jax_fn, params = jta.import_function(fn, *program.args, pad_stacks=pad)
        assert sorted(params) == sorted(_key(v) for v in program.variables)
        for mode in modes:
            if mode == "checked":
                exact, _ = jta.import_function(fn, *program.args)
                _close(jta.checked(jax.jit(exact))(params, *program.args), want)
                continue
            run = jax.jit(jax_fn) if mode == "jit" else jax_fn
            _close(run(params, *program.args), want, pad=pad and mode == "jit")
    jax_fn, params = jta.import_function(program.forward, *program.args, pad_stacks=pad)
    grads = jax.jit(jax.grad(_loss(jax_fn, program.args)))(params)
    loss, tape = program.train(*program.args)
    for v, g in zip(program.variables, tape, strict=True):
        np.testing.assert_allclose(grads[_key(v)], tf.convert_to_tensor(g).numpy(), rtol=2e-4, atol=2e-5)


def test_forward_after_a_tape_went_through_it() -> None:
    """A tape through a tf.function rewrites its While (accumulator outputs): the import is the same."""
    p = tf2_programs.scan(seed=4)
    x = tf.constant(p.args[0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(p.forward(x) ** 2)
    want = tape.gradient(loss, x)
    jax_fn, params = jta.import_function(p.forward, *p.args)
    graph = p.forward.get_concrete_function(*p.args).graph.as_graph_def()
    assert any(n.op == "TensorListPushBack" for f in graph.library.function for n in f.node_def)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(jax_fn(params, v) ** 2)))(p.args[0])
    np.testing.assert_allclose(grad, want, rtol=2e-4, atol=2e-5)


def test_keras3_lstm() -> None:
    """A Keras 3 layer (a stateful While, variables named by path): forward and train step under jit."""
    _check_program(tf2_programs.keras3_lstm(), ("jit",))


@pytest.mark.long_only
@pytest.mark.parametrize("name", list(tf2_programs.KERAS))
def test_keras_layers(name: str) -> None:
    """SimpleRNN, Bidirectional, stacked layers, Keras 3, a seq2seq encoder-decoder: eagerly, under jit
    and jta.checked, with jax.grad."""
    _check_program(tf2_programs.KERAS[name](), ("jit", "eager", "checked"))


@pytest.mark.long_only  # (about 10 s: the time budget; test_keras_layers runs it in every mode)
def test_seq2seq_train_step_under_checked() -> None:
    """An encoder-decoder with attention and a data-dependent stop: its train step under jta.checked
    (TensorFlow's shapes, the decoder's length learned) and jax.grad of its forward (the tape's values)."""
    p = tf2_programs.seq2seq()
    step, params = jta.import_function(p.train, *p.args)
    want = p.train(*p.args)
    _close(jta.checked(jax.jit(step))(params, *p.args), (want[0], [tf.convert_to_tensor(g) for g in want[1]]))


@pytest.mark.long_only
@pytest.mark.parametrize("name", list(tf2_programs.NESTED))
def test_nested_loops(name: str) -> None:
    """Loops in loops: the train step's accumulators of the inner lists are lists of lists."""
    _check_program(tf2_programs.NESTED[name](), ("jit", "eager"))


@pytest.mark.long_only  # (4 s; the tape slots in a loop below keep the class by default)
def test_cond_in_a_loop() -> None:
    """A data-dependent if in a scanned loop: its gradient's optionals are accumulated per step."""
    _check_program(tf2_programs.cond_in_loop(), ("jit",))


@pytest.mark.long_only
@pytest.mark.parametrize("name", list(tf2_programs.MORE))
def test_more_programs(name: str) -> None:
    """Conds in loops (eagerly too), loop variables with shape invariants."""
    _check_program(tf2_programs.MORE[name](), ("jit", "eager"))


@pytest.mark.long_only
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", list(tf2_programs.PROGRAMS))
def test_program_family(name: str, seed: int) -> None:
    """The eight program classes again with other seeds (other weights, inputs and trip counts)."""
    _check_program(tf2_programs.PROGRAMS[name](seed), ("jit", "eager"))


def test_unbounded_loop_is_jta_while_loop() -> None:
    """No bound at all: jta.while_loop. Under a bare jit its gradient's stacks and the tape's growing
    lists have 256 rows: a loop of 69 steps runs (forward, train step, jax.grad); one of 339 steps
    fails from compiled code naming jta.checked (never clamped), under which it runs."""
    w = tf.Variable(np.float32(0.99), name="w")

    @tf.function
    def f(x: Any) -> Any:
        return tf.while_loop(lambda i, v: v > 0.1, lambda i, v: (i + 1, v * w), (0, x))

    @tf.function
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = f(x)[1] ** 2
        return loss, tape.gradient(loss, w)

    short, long = np.float32(0.2), np.float32(3.0)
    assert int(f(short)[0]) == 69 and int(f(long)[0]) == 339
    jax_fn, params = jta.import_function(f, short)
    step, step_params = jta.import_function(train, short)
    grad = jax.grad(lambda p, x: jax_fn(p, x)[1] ** 2)
    _close(jax.jit(jax_fn)(params, long), f(long))
    _close(step(step_params, long), train(long))  # eagerly: step by step
    _close(jta.checked(jax.jit(step))(step_params, long), train(long))  # the tape's growing lists: rows learned
    np.testing.assert_allclose(jta.checked(jax.jit(grad))(params, long)["w"], train(long)[1], rtol=1e-5)
    _close(jax.jit(step)(step_params, short), train(short))
    np.testing.assert_allclose(jax.jit(grad)(params, short)["w"], train(short)[1], rtol=1e-5)
    # (a bare jit's check: a host callback, whose JaxRuntimeError holds the text; jta.throw() gives it)
    with pytest.raises(jax.errors.JaxRuntimeError, match="grows the list past the 256 elements"):
        jax.jit(step)(step_params, long)
    with pytest.raises(jta.errors.UnimplementedError, match="through jta.checked") as info:
        jta.throw()
    assert GraphError.LIST_BEYOND_CAPACITY.matches(info.value)
    with pytest.raises(jax.errors.JaxRuntimeError, match="339 steps, more than the 256 rows"):
        jax.jit(grad)(params, long)
    with pytest.raises(jta.errors.UnimplementedError) as info:
        jta.throw()
    assert Error.LOOP_STACK_UNPLANNED.matches(info.value)


@pytest.mark.rotate("mode")
@pytest.mark.parametrize("mode", ["forward", "train", "grad"])
def test_sizes_the_data_decides_under_checked(mode: str) -> None:
    """A dynamic_size TensorArray grown by a loop without a bound, and one of an argument's size n:
    under jta.checked their buffers get the rows the data needs (past the first 256: grown and compiled
    again) and their stacks TensorFlow's shapes, in the forward, the train step (the tape's accumulators
    grow too) and jax.grad."""
    w, u = tf.Variable(np.float32(0.98), name="w"), tf.Variable(np.float32(0.5), name="u")

    @tf.function
    def decay(x: Any) -> Any:  # 456 steps from 1000
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        i, _, ta = tf.while_loop(lambda i, v, ta: v > 0.1, lambda i, v, ta: (i + 1, v * w, ta.write(i, v)),
                                 (0, x, ta))
        return ta.stack(), i

    @tf.function
    def sized(x: Any, n: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=n)
        v = x
        for i in tf.range(n):
            v = tf.tanh(v * u + 1.0)
            ta = ta.write(i, v)
        return ta.stack()

    def train(fn: Any, v: Any) -> Any:
        @tf.function
        def step(*args: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.nest.flatten(fn(*args))[0] ** 2)
            return loss, tape.gradient(loss, v)
        return step

    for fn, v, calls in ((decay, w, [(np.float32(1e3),)]),
                         (sized, u, [(np.float32(0.3), np.int32(300)), (np.float32(0.3), np.int32(7))])):
        source = fn if mode != "train" else train(fn, v)
        jax_fn, params = jta.import_function(source, *calls[0])
        if mode == "grad":
            run = jta.checked(jax.jit(jax.grad(lambda p, *a, f=jax_fn: jnp.sum(jax.tree_util.tree_leaves(f(p, *a))[0] ** 2))))
        else:
            run = jta.checked(jax.jit(jax_fn))
        for args in calls:
            got = run(params, *args)
            if mode == "grad":
                np.testing.assert_allclose(got[_key(v)], train(fn, v)(*args)[1], rtol=2e-4)
            else:
                _close(got, source(*args))
        if mode == "forward":
            with pytest.raises(jta.errors.UnimplementedError, match="through jta.checked"):
                jax.jit(jax_fn)(params, *calls[0])


def test_dynamic_stack_under_jit_is_refused() -> None:
    """A stack whose length the data decides has no JAX shape under jit: refused, naming the way out."""
    p = tf2_programs.greedy_decoder()
    jax_fn, params = jta.import_function(p.forward, *p.args)
    _close(jax_fn(params, *p.args), p.forward(*p.args))  # eagerly: step by step, TF's shape
    with pytest.raises(jta.errors.UnimplementedError, match="pad_stacks=True") as info:
        jax.jit(jax_fn)(params, *p.args)
    assert GraphError.PADDED_STACK.matches(info.value)


def test_refusal_lists_ops_inside_library_functions() -> None:
    """Every unsupported op of every reached function, in one error, with TF2's ways out."""
    v = tf.Variable(np.ones(3, np.float32), name="v")

    @tf.function
    def f(x: Any) -> Any:
        y = tf.map_fn(lambda r: r * tf.random.stateless_binomial([3], [1, 2], 5.0, 0.5, output_dtype=tf.float32), x)
        tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=np.float32(0.1), delta=tf.reduce_sum(y, 0))
        return y

    with pytest.raises(jta.errors.UnimplementedError) as info:
        jta.import_function(f, np.ones((2, 3), np.float32))
    text = str(info.value)
    assert GraphError.TF2_UNSUPPORTED.matches(info.value)
    for needle in ("StatelessRandomBinomial", "ResourceApplyGradientDescent", "map_while_body", "optax",
                   "as arguments"):
        assert needle in text, (needle, text)


def test_refusals_of_callbacks_strings_and_summaries_name_their_ways_out() -> None:
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x: Any) -> Any:
        return tf.py_function(lambda a: a * 2, [x], tf.float32) + tf.strings.to_number(tf.strings.as_string(x))

    with pytest.raises(jta.errors.UnimplementedError) as info:
        jta.import_function(f, np.ones(3, np.float32))
    for needle in ("Python callbacks (EagerPyFunc", "jax.pure_callback", "Strings (AsString, StringToNumber)",
                   "pass the ids"):
        assert needle in str(info.value), needle

    @tf.function(input_signature=[tf.TensorSpec([3, 4], tf.float32), tf.TensorSpec([3], tf.int32)])
    def ragged(x: Any, n: Any) -> Any:  # (red-team batch 16: ragged rows of a map_fn, densified inside)
        rows = tf.map_fn(lambda a: a[0][: a[1]] * 2.0, (x, n), fn_output_signature=tf.RaggedTensorSpec([None]))
        return rows.to_tensor()

    with pytest.raises(jta.errors.UnimplementedError, match=r"Ragged values in a loop \(.*padded to a static"):
        jta.import_function(ragged, np.ones((3, 4), np.float32), np.array([2, 4, 1], np.int32))

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def proto(x: Any) -> Any:  # (TF2's writes are no-ops: tests/test_tf2_summaries.py)
        return x * 2, tf.compat.v1.summary.scalar("x", tf.reduce_sum(x))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (TF's: no default writer for TF1's summary ops)
        with pytest.raises(jta.errors.UnimplementedError, match=r"Summaries \(ScalarSummary\).*log them from Python"):
            jta.import_function(proto, np.ones(3, np.float32))


def test_list_misuse_has_tensorflow_texts() -> None:
    """Reading past a list's end fails with TensorFlow's text (code 434)."""
    @tf.function
    def f(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=2, element_shape=())
        return ta.write(0, x).read(3)

    with pytest.raises(tf.errors.InvalidArgumentError, match="Trying to access element 3 in a list with 2 elements"):
        f(np.float32(1))
    jax_fn, params = jta.import_function(f, np.float32(1))
    with pytest.raises(jta.errors.InvalidArgumentError, match="Trying to access element 3 in a list with 2 elements"):
        jax_fn(params, np.float32(1))


def _tf_text(f: Any, *args: Any) -> str:
    """The message TensorFlow's kernel raises for ``f(*args)`` (its first line, past TF's prefix)."""
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        f(*args)
    return next(line for line in str(caught.value).splitlines() if "elements." in line).strip()


@pytest.mark.parametrize("op", ["read", "gather", "write"])
@pytest.mark.parametrize("mode", ["eager", "checked", "jit"])
def test_an_index_known_at_run_time_is_checked_not_clamped(op: str, mode: str) -> None:
    """A TensorList index that is a traced argument is range-checked in compiled code, with
    TensorFlow's text: eagerly, under ``jta.checked``, and under a bare ``jax.jit`` (``jta.throw()``)."""
    @tf.function
    def f(x: Any, i: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3, element_shape=()).unstack(x)
        if op == "read":
            return ta.read(i)
        if op == "gather":
            return ta.gather(tf.stack([0, i, 1]))
        return ta.write(i, 5.0).stack()

    x = np.arange(3, dtype=np.float32)
    jax_fn, params = jta.import_function(f, x, np.int32(1))
    _close(jax.jit(jax_fn)(params, x, np.int32(2)), f(x, np.int32(2)))
    want = _tf_text(f, x, np.int32(7))
    run = {"eager": jax_fn, "checked": jta.checked(jax_fn),
           "jit": lambda *a: jax.block_until_ready(jax.jit(jax_fn)(*a))}[mode]
    with pytest.raises((jta.errors.InvalidArgumentError, jax.errors.JaxRuntimeError)) as caught:
        run(params, x, np.int32(7))
    if mode == "jit":  # a bare jit raises JAX's error; jta.throw() gives TensorFlow's
        with pytest.raises(jta.errors.InvalidArgumentError) as caught:
            jta.throw()
    assert str(caught.value).endswith(want), (str(caught.value), want)


def test_an_index_known_while_tracing_stages_no_check() -> None:
    """A static index of a list of static length is checked while tracing: the program holds no
    ``jta_check`` (under a bare jit each would be a host callback); a traced one holds one."""
    @tf.function
    def f(x: Any, i: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3, element_shape=()).unstack(x)
        return ta.read(1) + tf.reduce_sum(ta.gather([0, 2])) + ta.read(i)

    x = np.arange(3, dtype=np.float32)
    jax_fn, params = jta.import_function(f, x, np.int32(2))
    assert str(jax.make_jaxpr(jax_fn)(params, x, np.int32(2))).count("jta_check") == 1


def test_list_semantics_overwrite_and_unset_rows() -> None:
    """Overwrites are allowed, reads do not clear, unwritten rows of a known shape stack as zeros."""
    @tf.function
    def f(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=4, element_shape=(2,))
        ta = ta.write(1, x).write(1, 2 * x)
        a = ta.read(1)
        return ta.stack(), a + ta.read(1)

    x = np.arange(2, dtype=np.float32)
    jax_fn, params = jta.import_function(f, x)
    _close(jax.jit(jax_fn)(params, x), f(x))


def test_cond_and_case_static_and_traced() -> None:
    """If/Case: pruned where the predicate is static, lax.cond/lax.switch where it is not."""
    @tf.function
    def f(x: Any, k: Any) -> Any:
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)
        z = tf.switch_case(k, [lambda: y + 1.0, lambda: y * y, lambda: tf.sin(y)])
        return tf.cond(tf.shape(x)[0] > 1, lambda: z, lambda: -z)

    jax_fn, params = jta.import_function(f, np.ones(3, np.float32), np.int32(0))
    for x in (np.array([1.0, -2.0, 0.5], np.float32), np.array([-1.0, 0.2, 0.1], np.float32)):
        for k in (0, 1, 2, 7):
            _close(jax.jit(jax_fn)(params, x, np.int32(k)), f(x, np.int32(k)))
            _close(jax_fn(params, x, np.int32(k)), f(x, np.int32(k)))


def test_saved_model_signature(tmp_path: Any) -> None:
    """A SavedModel's signature: keyword arguments, the signature's dict of outputs."""
    p = tf2_programs.scan()
    module = tf.Module()
    module.w = p.variables[0]
    module.f = tf.function(lambda x: {"ys": p.forward(x)},
                           input_signature=[tf.TensorSpec(p.args[0].shape, tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.f})
    jax_fn, params = jta.import_saved_model(str(tmp_path))
    want = p.forward(*p.args)
    np.testing.assert_allclose(jax.jit(jax_fn)(params, x=p.args[0])["ys"], want, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(jax_fn(params, p.args[0])["ys"], want, rtol=2e-5, atol=1e-6)
    with pytest.raises(KeyError, match="no signature"):
        jta.import_saved_model(str(tmp_path), name="nope")


# -- regressions of the random programs (tests/test_tf2_programs.py), one per class -------------
@pytest.mark.parametrize("name", [  # (under --long: inner_bounded_growth, 7 s;
    pytest.param(n, marks=pytest.mark.long_only)  # minimum_bound, nested_growth, bounded_read_grad: 4-7 s)
    if n in ("inner_bounded_growth", "minimum_bound", "nested_growth", "bounded_read_grad") else n
    for n in tf2_programs.REGRESSIONS])
def test_random_program_regressions(name: str) -> None:
    """Each class of mismatch the random TF2 programs found, eagerly and under jit, train step and jax.grad."""
    program = tf2_programs.REGRESSIONS[name]()
    if name != "inner_bounded_growth":
        _check_program(program, ("jit", "eager"))
        return
    # The tape's gradient of a data-dependent inner loop inside an outer loop runs as many steps as the
    # forward's inner loop ran, a count it pops from an accumulator; the count keeps the forward's bound
    # (maximum_iterations=3), so the lists it grows are sized under jit too.
    step, params = jta.import_function(program.train, *program.args, pad_stacks=True)
    _close(step(params, *program.args), program.train(*program.args))
    _close(jax.jit(step)(params, *program.args), program.train(*program.args))
    _close(jta.checked(jax.jit(step))(params, *program.args), program.train(*program.args))
    fwd, params = jta.import_function(program.forward, *program.args, pad_stacks=True)
    _close(fwd(params, *program.args), program.forward(*program.args))
    _close(jax.jit(fwd)(params, *program.args), program.forward(*program.args), pad=True)
    grads = jax.jit(jax.grad(_loss(fwd, program.args)))(params)
    np.testing.assert_allclose(grads["u"], program.train(*program.args)[1][0], rtol=2e-4, atol=2e-5)


@pytest.mark.long_only
def test_nested_unbounded_growth_under_checked() -> None:
    """An inner tf.while_loop without any bound, in an outer loop, writing an outer dynamic_size
    TensorArray: under a bare jit refused (435), under jta.checked forward, train step (its gradient
    loop's count popped, unbounded) and jax.grad give TensorFlow's values and shapes. (About 15 s.)"""
    u = tf.Variable(np.array([0.9, -0.7], np.float32), name="u")

    def forward(x: Any) -> Any:
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(2,))
        n = tf.constant(0)
        for i in tf.range(3):
            def body(k: Any, v: Any, n: Any, acc: Any) -> Any:
                v = tf.tanh(v * u) * 0.9
                return k + 1, v, n + 1, acc.write(n, v)
            _, _, n, acc = tf.while_loop(lambda k, v, n, acc: tf.reduce_sum(tf.abs(v)) > 0.3, body,
                                         (0, x[i] + 1.0, n, acc))
        return acc.stack()

    program = tf2_programs._program("nested_unbounded_growth", forward, [u],
                                    (np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32),))
    for kind in ("forward", "train"):
        fn = getattr(program, kind)
        jax_fn, params = jta.import_function(fn, *program.args)
        with pytest.raises(jta.errors.UnimplementedError, match="through jta.checked"):
            jax.jit(jax_fn)(params, *program.args)
        _close(jta.checked(jax.jit(jax_fn))(params, *program.args), fn(*program.args))
    jax_fn, params = jta.import_function(program.forward, *program.args)
    grads = jta.checked(jax.jit(jax.grad(_loss(jax_fn, program.args))))(params)
    np.testing.assert_allclose(grads["u"], program.train(*program.args)[1][0], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("bounded", [False, pytest.param(True, marks=pytest.mark.long_only)])
def test_a_list_written_at_steps_a_counter_picks(bounded: bool) -> None:
    """A dynamic_size TensorArray written only when ``i % 2 == 0`` of a counter starting at 0: the
    loop's first abstract step, where the counter is static, does not write it; a later step does.
    Under jta.checked (forward and jax.grad) both loops give TensorFlow's values; a bare jit refuses the
    one without a bound (435) and pads the bounded one's stack with ``pad_stacks=True``."""
    w = tf.Variable(np.float32(0.9), name="w")

    def forward(x: Any) -> Any:
        a = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        b = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        v, i, j = x, 0, 0
        if bounded:
            for _ in tf.range(9):
                a, i = a.write(i, v), i + 1
                if i % 2 == 0:
                    b, j = b.write(j, v * 2.0), j + 1
                v = v * w
        else:
            while v > 0.05:
                a, i = a.write(i, v), i + 1
                if i % 2 == 0:
                    b, j = b.write(j, v * 2.0), j + 1
                v = v * w
        return a.stack(), b.stack()

    fn = tf.function(forward)
    x = np.float32(0.5)
    jax_fn, params = jta.import_function(fn, x)
    _close(jta.checked(jax.jit(jax_fn))(params, x), fn(x))
    if bounded:  # b's length is the data's to jax: its stack padded to the loop's bound
        padded, params = jta.import_function(fn, x, pad_stacks=True)
        _close(jax.jit(padded)(params, x), fn(x), pad=True)
    else:
        with pytest.raises(jta.errors.UnimplementedError, match="through jta.checked"):
            jax.jit(jax_fn)(params, x)

    def loss(p: Any) -> Any:
        return sum(jnp.sum(o ** 2) for o in jax_fn(p, x))

    with tf.GradientTape() as tape:
        want = tf.add_n([tf.reduce_sum(o ** 2) for o in fn(x)])
    grad = jta.checked(jax.jit(jax.grad(loss)))(params)["w"]
    np.testing.assert_allclose(grad, tape.gradient(want, w), rtol=2e-4)


def test_indexed_slices_output_is_dense() -> None:
    """A train step returning the tape's gradient of an embedding lookup (an IndexedSlices, a repeated
    id among the ids) gives tf.convert_to_tensor's value, eagerly and under jit; a ragged output is refused."""
    emb = tf.Variable(np.random.RandomState(0).normal(size=(10, 4)).astype(np.float32), name="emb")
    w = tf.Variable(np.linspace(0.5, 1.5, 4).astype(np.float32), name="w")

    @tf.function
    def step(ids: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.tanh(tf.nn.embedding_lookup(emb, ids) * w) ** 2)
        return loss, tape.gradient(loss, [emb, w])

    ids = np.array([1, 3, 3, 7], np.int32)
    loss, (g_emb, g_w) = step(ids)
    assert isinstance(g_emb, tf.IndexedSlices)
    jax_fn, params = jta.import_function(step, ids)
    for run in (jax_fn, jax.jit(jax_fn)):
        _close(run(params, ids), (loss, [tf.convert_to_tensor(g_emb), g_w]))

    @tf.function
    def ragged(x: Any) -> Any:
        return tf.RaggedTensor.from_row_lengths(x, [1, 2])

    with pytest.raises(jta.errors.UnimplementedError, match=r"composite outputs \(RaggedTensor\)"):
        jta.import_function(ragged, np.arange(3.0, dtype=np.float32))


def test_gather_gradient_with_repeated_indices() -> None:
    """TensorFlow's tape gradient of a TensorList gather scatters its rows, so a repeated index keeps one
    row's gradient (TF's, inside a tf.function); the imported train step gives TF's value, jax.grad of the
    imported forward the sum (the derivative)."""
    w = tf.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")

    def forward(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3).unstack(x * w)
        return tf.reduce_sum(ta.gather([0, 0, 1]) * tf.constant([1.0, 10.0, 100.0]))

    @tf.function
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = forward(x)
        return loss, tape.gradient(loss, w)

    x = np.ones(3, np.float32)
    step, params = jta.import_function(train, x)
    _close(jax.jit(step)(params, x), train(x))
    np.testing.assert_allclose(train(x)[1], [10.0, 100.0, 0.0])  # TF's: the 1 of index 0's first read is lost
    fwd, params = jta.import_function(tf.function(forward), x)
    np.testing.assert_allclose(jax.grad(lambda p: fwd(p, x))(params)["w"], [11.0, 100.0, 0.0])


@pytest.mark.parametrize("program", ["dynamic_size_small_initial",
                                     pytest.param("condition_reads_the_array", marks=pytest.mark.long_only)])
def test_lists_of_an_unknown_element_shape_in_loops_under_jit(program: str) -> None:
    """Lists of an unknown element shape written in loops (elements kept one by one outside them): a
    dynamic_size array of 2 grown to 6 by a static loop keeps a static length (its stack runs under a
    bare jit), and a loop whose condition reads the array gives its tape the element shape the buffer has
    (the red team's rerun found both after that change)."""
    w = tf.Variable(np.array([0.5, -0.3], np.float32), name="w")

    def forward(x: Any) -> Any:
        if program == "dynamic_size_small_initial":
            ta = tf.TensorArray(tf.float32, size=2, dynamic_size=True)
            for i in tf.range(6):
                ta = ta.write(i, x[i] * w)
            return ta.stack(), ta.size()
        ta = tf.TensorArray(tf.float32, size=10, clear_after_read=False).write(0, tf.reduce_sum(x[0] * w))
        i = tf.constant(0)
        while i < 9 and ta.read(i) > 0.05:
            ta, i = ta.write(i + 1, ta.read(i) * w[0]), i + 1
        return ta.stack(), i

    program_ = tf2_programs._program(program, forward, [w], (np.abs(np.random.default_rng(0).normal(
        size=(6, 2))).astype(np.float32),))
    _check_program(program_, ("jit",))


def test_a_stack_read_in_the_loop_that_grows_it_under_checked() -> None:
    """A stack of a list the loop grows, read in that loop: its rows differ from step to step. A loop of
    4 steps is unrolled under jta.checked, each step learning its count; in a loop of 66 (a lax.scan)
    jta.checked cannot learn one count, and its refusal names the op's result (code 506), not a
    TensorArray's stack(); a padded import runs under jit."""
    w = tf.Variable(np.float32(0.5), name="w")

    def forward(x: Any, steps: int) -> Any:
        out, h = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=()), tf.constant(0.0)
        for i in tf.range(steps):
            out = out.write(i, tf.tanh(x[i % 4] * w + h))
            h = 0.1 * tf.reduce_sum(out.stack())
        return h

    spec = [tf.TensorSpec([4], tf.float32)]
    short, long = (tf.function(lambda x, n=n: forward(x, n), input_signature=spec) for n in (4, 66))
    x = np.arange(4, dtype=np.float32)
    jax_fn, params = jta.import_function(short, x)
    _close(jta.checked(jax.jit(jax_fn))(params, x), short(x))
    padded, params = jta.import_function(short, x, pad_stacks=True)
    _close(jax.jit(padded)(params, x), short(x))
    jax_fn, params = jta.import_function(long, x)
    with pytest.raises(jta.errors.UnimplementedError) as caught:
        jta.checked(jax.jit(jax_fn))(params, x)
    assert Error.RESULT_SIZE_LEARNED.matches(caught.value) and "stack_padded" not in str(caught.value)


def test_a_growing_loop_variable_of_a_run_time_trip_count() -> None:
    """A cache grown by tf.concat (``shape_invariants``) in a loop of a run-time trip count runs eagerly
    and is refused under jit with the ways out (code 436), never a JAX shape error."""
    @tf.function(input_signature=[tf.TensorSpec([5, 3], tf.float32), tf.TensorSpec([], tf.int32)])
    def f(x: Any, n: Any) -> Any:
        i0, cache = tf.constant(0), tf.zeros([0, 3])
        _, cache = tf.while_loop(lambda i, c: i < n, lambda i, c: (i + 1, tf.concat([c, x[i][None] * 2.0], 0)),
                                 (i0, cache), shape_invariants=(i0.shape, tf.TensorShape([None, 3])))
        return cache

    x, n = np.arange(15, dtype=np.float32).reshape(5, 3), np.int32(4)
    jax_fn, params = jta.import_function(f, x, n)
    _close(jax_fn(params, x, n), f(x, n))
    with pytest.raises(jta.errors.UnimplementedError, match="changes shape from .* The ways out") as caught:
        jax.jit(jax_fn)(params, x, n)
    assert GraphError.TF2_LOOP.matches(caught.value)


@pytest.mark.parametrize("program", [pytest.param("split_in_a_loop", marks=pytest.mark.long_only),  # (5 s)
                                     "rows_of_their_own_shapes", "rows_in_a_loop"])
def test_elements_of_different_shapes_under_a_tape(program: str) -> None:
    """A TensorArray split into pieces of different lengths inside a loop, and one of ``infer_shape=False``
    written with rows of different lengths then concatenated: the forward, the train step (whose gradient
    lists hold one piece each, summed and concatenated by the pieces' lengths) and jax.grad give
    TensorFlow's values (tests/test_tf2_list_elements.py enumerates the list ops behind them)."""
    w = tf.Variable(np.array([0.5, -0.3, 1.2, 0.7], np.float32), name="w")

    def forward(x: Any) -> Any:
        acc = tf.constant(0.0)
        if program == "split_in_a_loop":
            for i in tf.range(3):
                ta = tf.TensorArray(tf.float32, size=2).split(x[i] * w, [1, 3])
                acc += tf.reduce_sum(ta.read(1)) * tf.reduce_sum(ta.read(0))
            return acc
        if program == "rows_in_a_loop":  # (a static trip count: unrolled, the rows' lengths static)
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
            for i in tf.range(3):
                ta = ta.write(i, (x[i] * w)[: (i % 3) + 1])
            return tf.reduce_sum(tf.sin(ta.concat()))
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
        ta = ta.write(0, x[0, :1] * w[0]).write(1, x[1, :3] * w[1:]).write(2, x[2, :2] * w[:2])
        return tf.reduce_sum(tf.sin(ta.concat()))

    @tf.function
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = forward(x) ** 2
        return loss, tape.gradient(loss, w)

    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    step, params = jta.import_function(train, x)
    _close(step(params, x), train(x))
    _close(jax.jit(step)(params, x), train(x))
    fwd, params = jta.import_function(tf.function(forward), x)
    grad = jax.jit(jax.grad(lambda p: fwd(p, x) ** 2))(params)["w"]
    np.testing.assert_allclose(grad, train(x)[1], rtol=1e-5)


# -- TensorList pieces: max_num_elements, TensorListConcatLists, TensorListPushBackBatch ---------
RAW = tf.raw_ops


def _tf_error(f: Any, *args: Any) -> str:
    """TensorFlow's kernel message for ``f(*args)``: the line of it past TF's node prefix."""
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        f(*args)
    lines = [ln.strip() for ln in str(caught.value).splitlines() if ln.strip() and not ln.strip().startswith(
        ("[[", "Detected at", "File ", "Graph execution"))]
    return lines[-1].split("{{function_node")[-1].split("}} ")[-1].split(" [Op:")[0]


@pytest.mark.parametrize("mode", ["eager", "checked", "jit"])
def test_push_onto_a_full_list_fails_with_tensorflow_text(mode: str) -> None:
    """``max_num_elements``: a push past it fails with TensorFlow's class and text, also where the
    length is only known at run time (a loop of a fed trip count, under jit: a check in compiled code)."""
    @tf.function
    def f(x: Any, n: Any) -> Any:
        lst = RAW.EmptyTensorList(element_shape=tf.constant([2]), max_num_elements=3, element_dtype=tf.float32)
        for i in tf.range(tf.minimum(n, 5)):
            lst = RAW.TensorListPushBack(input_handle=lst, tensor=x * tf.cast(i, tf.float32))
        return RAW.TensorListStack(input_handle=lst, element_shape=[2], element_dtype=tf.float32, num_elements=-1)

    x = np.array([1.0, 2.0], np.float32)
    jax_fn, params = jta.import_function(f, x, np.int32(2), pad_stacks=True)
    _close(jax_fn(params, x, np.int32(3)), f(x, np.int32(3)))  # full, not past it
    want = _tf_error(f, x, np.int32(5))
    assert want == "Tried to push item into a full list list size: 3 max_num_elements: 3", want
    run = {"eager": jax_fn, "checked": jta.checked(jax_fn),
           "jit": lambda *a: jax.block_until_ready(jax.jit(jax_fn)(*a))}[mode]
    with pytest.raises((jta.errors.InvalidArgumentError, jax.errors.JaxRuntimeError)) as caught:
        run(params, x, np.int32(5))
    if mode == "jit":
        with pytest.raises(jta.errors.InvalidArgumentError) as caught:
            jta.throw()
    assert str(caught.value).endswith(want), (str(caught.value), want)
    assert GraphError.LIST_FULL.matches(caught.value)


def test_push_onto_a_full_list_outside_loops() -> None:
    @tf.function
    def f(x: Any) -> Any:
        lst = RAW.EmptyTensorList(element_shape=tf.constant([2]), max_num_elements=1, element_dtype=tf.float32)
        lst = RAW.TensorListPushBack(input_handle=lst, tensor=x)
        return RAW.TensorListPushBack(input_handle=lst, tensor=x)

    want = _tf_error(lambda v: RAW.TensorListStack(input_handle=f(v), element_shape=[2],
                                                   element_dtype=tf.float32), np.ones(2, np.float32))
    g = tf.function(lambda v: RAW.TensorListStack(input_handle=f(v), element_shape=[2], element_dtype=tf.float32))
    with pytest.raises(jta.errors.InvalidArgumentError) as caught:
        jta.import_function(g, np.ones(2, np.float32))[0]({}, np.ones(2, np.float32))
    assert str(caught.value).endswith(want) and "max_num_elements: 1" in want


def _stack(lst: Any, shape: Any = -1) -> Any:
    return RAW.TensorListStack(input_handle=lst, element_shape=shape, element_dtype=tf.float32)


def test_concat_lists_scalar_and_batched() -> None:
    """TensorListConcatLists: a's elements then b's, for two lists and for vectors of lists (tf.stack)."""
    @tf.function
    def f(x: Any, y: Any) -> Any:
        a = RAW.TensorListFromTensor(tensor=x, element_shape=[2])
        b = RAW.TensorListFromTensor(tensor=y, element_shape=[2])
        r = RAW.TensorListReserve(element_shape=[2], num_elements=2, element_dtype=tf.float32)  # unset: zeros
        one = _stack(RAW.TensorListConcatLists(input_a=r, input_b=a, element_dtype=tf.float32), [2])
        both = RAW.TensorListConcatLists(input_a=tf.stack([a, b]), input_b=tf.stack([b, a]), element_dtype=tf.float32)
        first, second = tf.unstack(both)
        return one, _stack(first, [2]), _stack(second, [2]) * 2.0

    x, y = np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((1, 2), np.float32)
    jax_fn, params = jta.import_function(f, x, y)
    _close(jax_fn(params, x, y), f(x, y))
    _close(jax.jit(jax_fn)(params, x, y), f(x, y))
    grad = jax.grad(lambda a: jnp.sum(jax_fn(params, a, y)[2] ** 2))(x)  # TF registers no gradient for the op
    np.testing.assert_allclose(grad, 8.0 * x, rtol=1e-6)  # d/dx sum((2 [y; x])^2)


def test_concat_lists_in_a_loop() -> None:
    """Lists of run-time lengths (a bounded loop's): b's elements land after a's length."""
    @tf.function
    def f(x: Any, n: Any) -> Any:
        a = RAW.EmptyTensorList(element_shape=[2], max_num_elements=-1, element_dtype=tf.float32)
        for i in tf.range(tf.minimum(n, 4)):
            a = RAW.TensorListPushBack(input_handle=a, tensor=x[i])
        b = RAW.TensorListFromTensor(tensor=x[:2] * 10.0, element_shape=[2])
        return _stack(RAW.TensorListConcatLists(input_a=a, input_b=b, element_dtype=tf.float32), [2])

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    jax_fn, params = jta.import_function(f, x, np.int32(2), pad_stacks=True)
    for n in (0, 2, 4):
        want = f(x, np.int32(n))
        _close(jax_fn(params, x, np.int32(n)), want)
        got = np.asarray(jax.jit(jax_fn)(params, x, np.int32(n)))
        np.testing.assert_array_equal(got[:want.shape[0]], want)
        np.testing.assert_array_equal(got[want.shape[0]:], 0)


def _pairs() -> dict[str, Any]:
    """Misuses of the two ops, each a function of x (float32 [2, 2]) that TensorFlow refuses."""
    def fl(v: Any) -> Any:
        return RAW.TensorListFromTensor(tensor=v, element_shape=[2])

    def concat(a: Any, b: Any) -> Any:
        return RAW.TensorListLength(input_handle=RAW.TensorListConcatLists(input_a=a, input_b=b,
                                                                           element_dtype=tf.float32))

    def pbb(h: Any, t: Any) -> Any:
        return _stack(tf.unstack(RAW.TensorListPushBackBatch(input_handles=h, tensor=t))[0])
    return {  # (the misuses TensorFlow's shape inference lets through when the argument's shape is unknown)
        "concat unknown": lambda x: concat(RAW.EmptyTensorList(element_shape=-1, max_num_elements=-1,
                                                               element_dtype=tf.float32), fl(x)),
        "concat shapes": lambda x: concat(fl(x), RAW.TensorListFromTensor(tensor=x, element_shape=[-1])),
        "push_back_batch size": lambda x: pbb(tf.stack([fl(x), fl(x)]), x[:1]),
        "push_back_batch shape": lambda x: pbb(tf.stack([fl(x), fl(x)]), tf.concat([x, x], 1)),
        "push_back shape": lambda x: _stack(RAW.TensorListPushBack(input_handle=fl(x), tensor=x[0, :1])),
    }


@pytest.mark.parametrize("name", list(_pairs()))
def test_list_op_misuse_has_tensorflow_texts(name: str) -> None:
    """Each misuse fails as TensorFlow's kernel does: InvalidArgumentError, TensorFlow's text (code 434)."""
    f = tf.function(_pairs()[name], input_signature=[tf.TensorSpec([None, None], tf.float32)])
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    want = _tf_error(f, x)
    with pytest.raises(jta.errors.InvalidArgumentError) as caught:
        jax_fn, params = jta.import_function(f, x)
        jax_fn(params, x)
    assert GraphError.INVALID_ARGUMENT.matches(caught.value)
    assert str(caught.value).endswith(want), (str(caught.value), want)


def test_push_back_batch() -> None:
    """TensorListPushBackBatch: row b of the tensor pushed onto list b (max_num_elements unchecked, as in TF)."""
    @tf.function
    def f(x: Any) -> Any:
        m = RAW.EmptyTensorList(element_shape=[2], max_num_elements=1, element_dtype=tf.float32)
        a = RAW.TensorListPushBack(input_handle=m, tensor=x[0])
        out = RAW.TensorListPushBackBatch(input_handles=tf.stack([m, a]), tensor=x * 3.0)
        return [_stack(lst, [2]) for lst in tf.unstack(out)]

    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    jax_fn, params = jta.import_function(f, x)
    _close(jax_fn(params, x), f(x))
    _close(jax.jit(jax_fn)(params, x), f(x))


# -- the coverage table of docs/tf2-import.md ---------------------------------------------------
def coverage_markdown() -> str:
    """The TF2-only op types (the ordinary ones are the TF1 importer's table), by group."""
    groups = {"TensorList ops": sorted(_lists.LIST_OPS), "Functional control flow, calls and variables":
              sorted(_functions.CONTROL_OPS)}
    lines = [f"<!-- generated by `{COMMAND}` from the op registry; do not edit -->", ""]
    for group, names in groups.items():
        lines += [f"**{group}** ({len(names)}): " + ", ".join(f"`{n}`" for n in names), ""]
    lines.append(f"**All op types** jta.import_function runs: {len(supported_tf2_ops())} (the TF1 importer's "
                 "ordinary ops, listed in [Importing TF1 graphs](graph-import.md), and the above).")
    return "\n".join(lines) + "\n"


def test_coverage_table_is_generated_from_the_registry() -> None:
    assert TABLE.exists() and TABLE.read_text(encoding="utf-8") == coverage_markdown(), \
        f"{TABLE.relative_to(ROOT)} is stale: run {COMMAND}"
    assert f'--8<-- "{TABLE.name}"' in (ROOT / "docs" / "tf2-import.md").read_text(encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(f"usage: {COMMAND}   (writes {TABLE.relative_to(ROOT)})")
    TABLE.write_text(coverage_markdown(), encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)}")


def _tape_grads(f: Any, variables: list[Any], *args: Any) -> list[Any]:
    @tf.function
    def train(*args: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(f(*args))
        return tape.gradient(loss, variables)
    return [g.numpy() for g in train(*args)]


def test_stop_gradient_stops_jax_grad_too() -> None:
    """``tf.stop_gradient``, a loop's ``back_prop=False`` and ``tape.stop_recording`` are
    StopGradient nodes: ``jax.grad`` of the import stops there, as TF's tape does."""
    w = tf.Variable(np.float32(0.7), name="w")

    def stopped(x: Any) -> Any:
        return tf.stop_gradient(w * x) + w * x

    def no_backprop(x: Any) -> Any:
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w), (0, x), back_prop=False)
        return y + w * x

    for forward in (stopped, no_backprop):
        f = tf.function(forward, input_signature=[tf.TensorSpec([], tf.float32)])
        x = np.float32(2.0)
        jax_fn, params = jta.import_function(f, x)
        (want,) = _tape_grads(f, [w], x)
        loss = functools.partial(lambda fn, x, p: jnp.sum(fn(p, x)), jax_fn, x)
        for run in (jax.grad, lambda g: jax.jit(jax.grad(g))):
            np.testing.assert_allclose(run(loss)(params)["w"], want, rtol=1e-6)


@pytest.mark.long_only  # (3 s; test_custom_gradients_are_tensorflows keeps the class)
def test_a_custom_gradient_in_a_called_function() -> None:
    """``tf.nn.silu`` (a ``tf.custom_gradient`` whose gradient reads forward tensors) in a model that is
    a ``tf.function`` of its own. TF calls its ``__forward_`` variant, which outputs those tensors under
    the nodes' names and renames the nodes ``<name>_0``: ``jax.grad`` refused the custom gradient, and
    a train step whose loss reads the output's size recursed without end."""
    w = tf.Variable(np.array([-1.0, 0.5, 2.0], np.float32), name="w")
    spec = [tf.TensorSpec([3], tf.float32)]
    model = tf.function(lambda x: tf.nn.silu(x * w), input_signature=spec)

    @tf.function(input_signature=spec)
    def forward(x: Any) -> Any:
        o = model(x)
        return tf.reduce_sum(o ** 2) / tf.cast(tf.size(o), tf.float32)

    @tf.function(input_signature=spec)
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = forward(x)
        return loss, tape.gradient(loss, w)

    x = np.ones(3, np.float32)
    want = train(x)
    step, params = jta.import_function(train, x)
    _close(jax.jit(step)(params, x), want)
    jax_fn, params = jta.import_function(forward, x)
    np.testing.assert_allclose(jax.jit(jax.grad(jax_fn))(params, x)["w"], want[1].numpy(), rtol=1e-5)


def test_custom_gradients_are_tensorflows(monkeypatch: Any) -> None:
    """A ``tf.custom_gradient``'s gradient (Python in TF's registry) is traced to a graph and run by
    ``jax.grad`` (a clipped gradient, ``tf.recompute_grad`` reading a variable), under jit and
    ``jax.jacrev`` too; where it cannot be traced, ``jax.grad`` refuses (differentiating the
    forward ops would give another gradient) and the train step (TF's gradient graph) runs."""
    w = tf.Variable(np.float32(0.7), name="w")
    v = tf.Variable(np.float32([0.3, -0.2, 0.5]), name="v")

    @tf.custom_gradient
    def clipped(u: Any) -> Any:
        return tf.identity(u), lambda dy: tf.clip_by_value(dy, -0.1, 0.1)

    @tf.recompute_grad
    def block(x: Any) -> Any:
        return tf.tanh(x * v)

    f = tf.function(lambda x: clipped(w * x) + tf.reduce_sum(block(block(x))),
                    input_signature=[tf.TensorSpec([3], tf.float32)])
    x = np.float32([2.0, -1.0, 0.5])
    jax_fn, params = jta.import_function(f, x)
    _close(jax.jit(jax_fn)(params, x), f(x))
    want_w, want_v = _tape_grads(f, [w, v], x)
    for run in (jax.grad, lambda g: jax.jit(jax.grad(g))):
        got = run(lambda p: jnp.sum(jax_fn(p, x)))(params)
        np.testing.assert_allclose(got["w"], want_w, rtol=1e-6)
        np.testing.assert_allclose(got["v"], want_v, rtol=1e-5)
    rows = jax.jacrev(lambda p: jax_fn(p, x))(params)["w"]
    np.testing.assert_allclose(rows, 0.1 * x, rtol=1e-6)  # row k: dy = e_k, clipped to 0.1, times dx_k/dw

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(f(x))
        return tape.gradient(y, [w, v])

    step, step_params = jta.import_function(train, x)
    _close(jax.jit(step)(step_params, x), train(x))
    monkeypatch.setattr(_custom_gradients, "registered_gradient", lambda kind, args: None)
    jax_fn, params = jta.import_function(f, x)
    _close(jax_fn(params, x), f(x))
    with pytest.raises(jta.errors.UnimplementedError, match="tf.custom_gradient.*import that train step"):
        jax.grad(lambda p: jnp.sum(jax_fn(p, x)))(params)


def test_a_custom_gradient_in_a_loop_reading_a_tensor_from_outside_it() -> None:
    """A ``tf.custom_gradient`` called in a loop body whose gradient closes over a tensor of the function
    around the loop (a variable read before it): the capture is that function's tensor, found in its
    body, where ``jax.grad`` refused (code 423). (Generator seed 193.)"""
    w = tf.Variable(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32) * 0.5, name="w")

    @tf.custom_gradient
    def product(v: Any, wt: Any) -> Any:
        def grad(dy: Any) -> Any:
            return tf.linalg.matvec(wt, dy, transpose_a=True), 0.5 * dy[:, None] * v[None, :]
        return tf.linalg.matvec(wt, v), grad

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32)])
    def f(x: Any) -> Any:
        wt, h = tf.convert_to_tensor(w), tf.zeros([3])
        for i in tf.range(tf.shape(x)[0]):
            h = 0.8 * tf.tanh(product(x[i] + 0.5 * h, wt))
        return tf.reduce_sum(h ** 2)

    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    jax_fn, params = jta.import_function(f, x)
    (want,) = _tape_grads(f, [w], x)
    np.testing.assert_allclose(jax.jit(jax.grad(jax_fn))(params, x)["w"], want, rtol=1e-5, atol=1e-7)


def test_a_custom_gradient_in_a_scan_reading_its_own_input() -> None:
    """A straight-through estimator in ``tf.scan`` (red-team batch 19): its gradient closes over its input,
    which is the loop body's argument, a placeholder of the body's graph whose name is not the function
    input's: found by its position, where ``jax.grad`` refused (code 423)."""
    w = tf.Variable(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32), name="w")

    @tf.custom_gradient
    def binarize(x: Any) -> Any:
        return tf.sign(x), lambda dy: dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

    @tf.function
    def f(xs: Any) -> Any:
        states = tf.scan(lambda h, x: tf.tanh(tf.linalg.matvec(w, binarize(h)) + x), xs, tf.zeros([3]) + 0.3)
        return tf.reduce_sum(states)

    xs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    jax_fn, params = jta.import_function(f, xs)
    (want,) = _tape_grads(f, [w], xs)
    np.testing.assert_allclose(jax.jit(jax.grad(jax_fn))(params, xs)["w"], want, rtol=1e-5, atol=1e-6)


def _train_matches(train: Any, *args: Any) -> None:
    step, params = jta.import_function(train, *args)
    want = train(*args)
    _close(step(params, *args), want)
    _close(jax.jit(step)(params, *args), want)


@pytest.mark.parametrize("program", ["shapes_in_a_loop", "shapes_outside",
                                     pytest.param("float64_nested", marks=pytest.mark.long_only)])  # (4 s)
def test_tape_slots_of_one_dtype_and_other_shapes(program: str) -> None:
    """TF's cond may put intermediates of one dtype and different shapes (matvec's ``[3, 1]`` operand, a
    ``[3]`` product) in one optional slot of its branches, with no empty optional among them; and a
    float64 intermediate is float32 in jta without x64. The train step is TF's eagerly and under jit
    (the generator's cond_tape family found both: seeds 55, 62, 146, 154 and 76, 84, 100)."""
    w = tf.Variable(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32) * 0.5, name="w")
    u = tf.Variable(np.array([0.5, -0.3, 1.2], np.float32), name="u")

    def branch(v: Any) -> Any:
        if program == "float64_nested":
            return tf.cond(x_sum(v) > 0.0, lambda: tf.cast(tf.exp(-tf.square(tf.cast(v, tf.float64))), tf.float32) * u,
                           lambda: tf.cond(tf.reduce_max(v) > 0.0, lambda: tf.tanh(v * u) * tf.sin(v),
                                           lambda: tf.sin(v) * u))
        return tf.cond(x_sum(v) > 0.0, lambda: tf.tanh(tf.linalg.matvec(w, v)), lambda: tf.tanh(v * u) * tf.sin(v))

    def x_sum(v: Any) -> Any:
        return tf.reduce_sum(v)

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32)])
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            h = tf.zeros([3])
            if program == "shapes_outside":
                h = branch(x[0])
            else:
                for i in tf.range(4):
                    h = tf.tanh(branch(tf.linalg.matvec(w, x[i]) + 0.5 * h))
            loss = tf.reduce_sum(h ** 2)
        return loss, tape.gradient(loss, [w, u])

    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    step, params = jta.import_function(train, x)
    _close(step(params, x), train(x))
    _close(jax.jit(step)(params, x), train(x))


def test_train_step_through_a_cond_whose_branches_run_different_loops() -> None:
    """Each branch's gradient loop pops its forward loop's accumulators (TensorLists, all variants) from
    one optional slot of the cond: the slot holds lists of ``[]`` or ``[3]`` elements, and the read in
    the gradient's branch ``k`` takes branch ``k``'s (red-team ``switch_case_nested_while``: it was refused
    as ambiguous). Both branches taken, under ``jta.checked`` (the gradient loops' counts are traced)."""
    w = tf.Variable(np.array([0.5, -1.0, 2.0], np.float32), name="w")

    def looped(x: Any) -> Any:
        h = x
        for _ in tf.range(3):
            h = tf.sin(h * w)
        return h

    def written(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=3)
        for i in tf.range(3):
            ta = ta.write(i, x[i] * w)
        return tf.reduce_sum(ta.stack(), 0)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cond(tf.reduce_sum(x * w) > 0, lambda: looped(x), lambda: written(x)) ** 2)
        return loss, tape.gradient(loss, w)

    x = np.array([1.0, 0.2, 0.7], np.float32)
    step, params = jta.import_function(train, x)
    checked = jta.checked(jax.jit(step))
    for v in (x, -x):
        _close(checked(params, v), train(v))


@pytest.mark.long_only  # (9 s; the random programs' cond_tape family covers its class by default)
def test_train_steps_through_conds_whose_branches_keep_different_intermediates() -> None:
    """TF's cond gives each branch's intermediates the same optional slots (in a loop), so one slot
    holds different types per branch, and a switch's branches output different intermediates: the
    train steps run under jit, with every branch taken. Nested conds (``tf.case``) too."""
    w = tf.Variable(np.array([0.5, -0.3, 1.2], np.float32), name="w")
    v = tf.Variable(np.array([0.5, -0.3], np.float32), name="v")

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32), tf.TensorSpec([], tf.int32)])
    def switch(x: Any, k: Any) -> Any:
        with tf.GradientTape() as tape:
            y = tf.switch_case(k, [lambda: x * w, lambda: tf.sin(x) + w, lambda: tf.reduce_sum(x * w) * tf.ones([3])])
            loss = tf.reduce_sum(y ** 2)
        return loss, tape.gradient(loss, w)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def case(x: Any) -> Any:
        with tf.GradientTape() as tape:
            s = tf.reduce_sum(x)
            y = tf.case([(s > 1.0, lambda: x * w), (s < -1.0, lambda: x - w)], default=lambda: tf.cos(x * w))
            loss = tf.reduce_sum(y ** 2)
        return loss, tape.gradient(loss, w)

    @tf.function(input_signature=[tf.TensorSpec([4, 2], tf.float32)])
    def nested_in_loop(x: Any) -> Any:
        with tf.GradientTape() as tape:
            h = tf.zeros([2])
            for i in tf.range(4):
                if x[i, 0] > 0:
                    if x[i, 1] > 0:
                        h = tf.tanh(h * v + x[i])
                    else:
                        h = tf.sin(h + v)
                else:
                    h = h * 0.5 - v * x[i]
            loss = tf.reduce_sum(h ** 2)
        return loss, tape.gradient(loss, v)

    @tf.function(input_signature=[tf.TensorSpec([5, 2], tf.float32)])
    def writes_in_branches(x: Any) -> Any:
        with tf.GradientTape() as tape:
            ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for i in tf.range(5):
                if tf.reduce_sum(x[i]) > 0:
                    ta = ta.write(i, x[i] * v)
                else:
                    ta = ta.write(i, x[i] - v)
            loss = tf.reduce_sum(ta.stack() ** 2)
        return loss, tape.gradient(loss, v)

    x3 = np.array([0.2, 0.3, 0.1], np.float32)
    for k in range(3):
        _train_matches(switch, x3, np.int32(k))
    for x in (x3, 5 * x3, -5 * x3):
        _train_matches(case, x)
    _train_matches(nested_in_loop, np.array([[1., 1.], [1., -1.], [-1., 1.], [1., 1.]], np.float32))
    _train_matches(writes_in_branches, np.random.default_rng(4).normal(size=(5, 2)).astype(np.float32))


def test_a_list_written_in_one_branch_of_a_run_time_if() -> None:
    """The filter idiom (``if x[i] > 0: ta = ta.write(j, ...)``), in a loop and outside one: the
    branches' lists become one buffer and a run-time length; ``jta.checked`` gives TensorFlow's
    shape, ``pad_stacks=True`` the loop's rows (zeros past the length)."""
    @tf.function(input_signature=[tf.TensorSpec([6], tf.float32)])
    def keep_positive(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        j = 0
        for i in tf.range(6):
            if x[i] > 0:
                ta = ta.write(j, x[i] * 2.0)
                j += 1
        return ta.stack(), j

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def one_or_two(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(0, x)
        if x > 0:
            ta = ta.write(1, x * 2.0)
        return ta.stack()

    for f, x in ((keep_positive, np.array([0.3, -1.0, 0.9, 0.4, -0.8, 0.2], np.float32)),
                 (keep_positive, -np.ones(6, np.float32)), (one_or_two, np.float32(0.5)), (one_or_two, np.float32(-0.5))):
        want = f(x)
        jax_fn, params = jta.import_function(f, x)
        _close(jax_fn(params, x), want)
        _close(jta.checked(jax.jit(jax_fn))(params, x), want)
        padded, _ = jta.import_function(f, x, pad_stacks=True)
        _close(jax.jit(padded)(params, x), want, pad=True)


@pytest.mark.long_only  # (5 s; a legacy Defun call, as tf.nn.ctc_loss makes)
def test_a_function_called_as_an_op_type() -> None:
    """A legacy ``Defun`` call names a library function as its node's op type (``tf.nn.ctc_loss``
    on CPU makes them): the library's functions are converted with the library at hand; ``jax.grad``
    runs CTC's custom gradient."""
    w = tf.Variable(np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32), name="w")

    @tf.function
    def ctc(x: Any, labels: Any) -> Any:
        logits = tf.einsum("btf,fc->btc", x, w)
        return tf.reduce_mean(tf.nn.ctc_loss(labels, logits, label_length=tf.constant([2, 3]),
                                             logit_length=tf.fill([2], 6), logits_time_major=False, blank_index=0))

    xs = np.random.default_rng(1).normal(size=(2, 6, 3)).astype(np.float32)
    labels = np.array([[1, 2, 0], [3, 3, 1]], np.int32)
    jax_fn, params = jta.import_function(ctc, xs, labels)
    _close(jax_fn(params, xs, labels), ctc(xs, labels))
    _close(jax.jit(jax_fn)(params, xs, labels), ctc(xs, labels))
    # its custom gradient reads forward values the loss does not need (computed on demand), and the
    # forward ops behind it (log space, infinities) are not differentiated
    (want,) = _tape_grads(ctc, [w], xs, labels)
    got = jax.jit(jax.grad(lambda p: jax_fn(p, xs, labels)))(params)["w"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_nested_arguments_are_taken_as_the_function_takes_them() -> None:
    """A function of a dict (a Keras model's named inputs) takes the dict, as ``fn`` does (its
    leaves one by one too), eagerly and under jit."""
    w = tf.Variable(np.float32(2.0), name="w")
    f = tf.function(lambda inputs, z: {"y": inputs["a"] * w + tf.cast(inputs["b"], tf.float32) + z})
    inputs, z = {"b": np.arange(3, dtype=np.int32), "a": np.ones(3, np.float32)}, np.float32(0.5)
    jax_fn, params = jta.import_function(f, inputs, z)
    want = f(inputs, z)
    _close(jax_fn(params, inputs, z), want)
    _close(jax.jit(jax_fn)(params, inputs, z), want)
    _close(jax_fn(params, inputs["a"], inputs["b"], z), want)

    def train(inputs: Any, scale: float = 2.0, square: Any = tf.square) -> Any:  # (Python defaults: constants)
        return square(inputs["a"] * w) * scale

    g = tf.function(train)
    jax_fn, params = jta.import_function(g, inputs)
    _close(jax.jit(jax_fn)(params, inputs), g(inputs))


def test_captured_tensors_are_constants() -> None:
    """A captured eager tensor (a closure's ``tf.constant``, a Keras 3 ``Normalization``'s adapted
    mean and variance) is a constant of the import; the variables stay ``params``."""
    keras = pytest.importorskip("keras")
    c = tf.constant([1.0, 2.0, 3.0])
    f = tf.function(lambda x: x * c)
    x = np.ones(3, np.float32)
    jax_fn, params = jta.import_function(f, x)
    assert params == {}
    _close(jax.jit(jax_fn)(params, x), f(x))

    norm = keras.layers.Normalization()
    norm.adapt(np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32))
    lstm = keras.layers.LSTM(3)
    g = tf.function(lambda x: lstm(norm(x)))
    xs = np.random.default_rng(1).normal(size=(2, 5, 3)).astype(np.float32)
    jax_fn, params = jta.import_function(g, xs)
    assert len(params) == len(lstm.trainable_variables)
    _close(jax.jit(jax_fn)(params, xs), g(xs))


@pytest.mark.long_only  # (4 s; test_sizes_the_data_decides_under_checked keeps the class)
def test_where_and_boolean_mask_under_checked() -> None:
    """``tf.where(c)``'s rows (``boolean_mask``'s) are the data's: eager calls and ``jta.checked``
    (which learns them) give TensorFlow's values, shapes and gradients; a bare jit refuses."""
    w = tf.Variable(np.float32(1.5), name="w")

    @tf.function(input_signature=[tf.TensorSpec([6], tf.float32)])
    def masked(x: Any) -> Any:
        kept = tf.boolean_mask(x * w, x > 0)
        return kept, tf.where(x > 0), tf.reduce_mean(kept ** 2)

    jax_fn, params = jta.import_function(masked, np.zeros(6, np.float32))
    checked = jta.checked(jax.jit(jax_fn))
    grad = jta.checked(jax.jit(jax.grad(lambda p, x: jax_fn(p, x)[2])))
    for x in (np.array([0.5, -1.0, 2.0, -0.1, 0.3, -2.0], np.float32), np.array([1, 2, 3, -1, 5, 6], np.float32)):
        want = masked(x)
        _close(jax_fn(params, x), want)
        _close(checked(params, x), want)
        with tf.GradientTape() as tape:
            loss = masked(x)[2]
        np.testing.assert_allclose(grad(params, x)["w"], tape.gradient(loss, w).numpy(), rtol=1e-6)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked learns it"):
        jax.jit(jax_fn)(params, x)


@pytest.mark.long_only  # (6 s; test_graph_control_flow's short-loop Where keeps the class by default)
def test_sizes_the_data_decides_per_step_of_a_short_loop() -> None:
    """A ``boolean_mask``/``tf.where`` in a loop body whose count differs from step to step: a loop of a
    static trip count up to 64 is unrolled under ``jta.checked``, so each step learns its own count
    (``jax.grad``, and the train step, whose loss is the value). (A longer one is a ``lax.scan``, traced once for every
    step, whose counts differ at run time: refused with the learned size's text, as
    :func:`test_a_stack_read_in_the_loop_that_grows_it_under_checked` checks.)"""
    w = tf.Variable(np.linspace(-1, 1, 6).astype(np.float32), name="w")

    def body(x: Any, steps: int) -> Any:
        acc = tf.constant(0.0)
        for i in tf.range(steps):
            y = x[i % 3] * w + tf.cast(i, tf.float32) * 0.1
            acc += tf.reduce_sum(tf.boolean_mask(y, y > 0) ** 2) + tf.cast(tf.size(tf.where(y < 0)), tf.float32)
        return acc

    spec = [tf.TensorSpec([3, 6], tf.float32)]
    short = tf.function(lambda x: body(x, 3), input_signature=spec)

    @tf.function(input_signature=spec)
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = body(x, 3)
        return loss, tape.gradient(loss, w)

    x = np.random.default_rng(7).normal(size=(3, 6)).astype(np.float32)
    jax_fn, params = jta.import_function(short, x)  # (its value: the train step's loss)
    with tf.GradientTape() as tape:
        loss = short(x)
    grad = jta.checked(jax.jit(jax.grad(jax_fn)))
    np.testing.assert_allclose(grad(params, x)["w"], tape.gradient(loss, w).numpy(), rtol=2e-5, atol=1e-6)
    step, params = jta.import_function(train, x)
    _close(jta.checked(jax.jit(step))(params, x), train(x))


def test_sizes_the_data_decides_per_step_of_a_long_loop_run_eagerly() -> None:
    """The same body in a loop of 70 steps (more than are unrolled): an eager call runs it step by step,
    as TensorFlow does, where it was traced as a scan and refused as under jit; ``jta.checked``, which
    compiles it once for all steps, refuses it with a text that names the eager call (code 506)."""
    w = tf.Variable(np.linspace(-1, 1, 6).astype(np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([3, 6], tf.float32)])
    def f(x: Any) -> Any:
        acc = tf.constant(0.0)
        for i in tf.range(70):
            y = x[i % 3] * w + tf.cast(i, tf.float32) * 0.01
            acc += tf.reduce_sum(tf.boolean_mask(y, y > 0) ** 2)
        return acc

    x = np.random.default_rng(7).normal(size=(3, 6)).astype(np.float32)
    jax_fn, params = jta.import_function(f, x)
    _close(jax_fn(params, x), f(x))
    with pytest.raises(jta.errors.UnimplementedError, match="an eager call runs any loop step by step"):
        jta.checked(jax.jit(jax_fn))(params, x)


def test_jax_grad_under_checked_of_an_index_into_a_stack_of_run_time_length() -> None:
    """``jax.grad`` under ``jta.checked`` of a forward that indexes a stack whose length an argument
    decides (``stack[:, 2]``): its first trace guesses 0 rows, so the index fails a static check; the
    probe that learns the size must trace ``jax.grad`` as that trace did (not the forward it wraps,
    whose sizes are numbered otherwise), or it never reaches the size and reports the false error."""
    w = tf.Variable(np.float32(0.5), name="w")

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32), tf.TensorSpec([], tf.int32)])
    def f(x: Any, n: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=n)
        for t in tf.range(n):
            ta = ta.write(t, x[:, t] * w)
        return tf.transpose(ta.stack())[:, 2]

    x, n = np.arange(8, dtype=np.float32).reshape(2, 4), np.int32(3)
    jax_fn, params = jta.import_function(f, x, n)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(f(x, n) ** 2)
    grad = jta.checked(jax.jit(jax.grad(lambda p: jnp.sum(jax_fn(p, x, n) ** 2))))
    np.testing.assert_allclose(grad(params)["w"], tape.gradient(loss, w).numpy(), rtol=1e-6)


def test_a_write_at_a_run_time_index_outside_loops_grows_under_checked() -> None:
    """``ta.write(n, x)`` of a ``dynamic_size`` TensorArray at an argument ``n``, outside any loop: a bare
    jit refuses it (code 435), naming jta.checked, which sizes the buffer from its plan, grows it when a
    run writes past it (n = 300 > 256 rows) and gives TensorFlow's stack; a negative index fails with
    TensorFlow's text (where TensorFlow's own kernel crashes)."""
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([2], tf.float32)])
    def f(n: Any, x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        return ta.write(n, x).stack()

    x = np.array([1.0, 2.0], np.float32)
    jax_fn, params = jta.import_function(f, np.int32(2), x)
    with pytest.raises(jta.errors.UnimplementedError, match="through jta.checked") as info:
        jax.jit(jax_fn)(params, np.int32(2), x)
    assert GraphError.LIST_CAPACITY.matches(info.value)
    checked = jta.checked(jax.jit(jax_fn))
    for n in (2, 300):
        _close(checked(params, np.int32(n), x), f(np.int32(n), x))
    with pytest.raises(jta.errors.InvalidArgumentError, match="Trying to modify element -1 in a list"):
        checked(params, np.int32(-1), x)


def _jacobian_of_a_loop(pfor: bool) -> Any:
    w = tf.Variable(np.full((2, 2), 0.4, np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([3, 2], tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = tf.zeros([2])
            for i in tf.range(3):
                h = tf.tanh(tf.linalg.matvec(w, x[i]) + h)
        return tape.jacobian(h, x, experimental_use_pfor=pfor)
    return f


@pytest.mark.long_only  # (about 10 s)
def test_a_jacobian_of_a_loop_without_pfor() -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    f = _jacobian_of_a_loop(False)
    jax_fn, params = jta.import_function(f, x)
    _close(jax.jit(jax_fn)(params, x), f(x))

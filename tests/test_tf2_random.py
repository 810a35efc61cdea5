"""TensorFlow's stateless random ops through ``jta.import_function``, against TensorFlow itself
(:mod:`jta.graph_import._ops_random`): ``tf.random.stateless_uniform`` (floats of every width, bounded and
full-range integers), ``stateless_normal``, ``stateless_truncated_normal``, ``stateless_categorical``,
``tf.random.split`` / ``fold_in``, ``tf.nn.experimental.stateless_dropout``, the v1 raw ops, noise in a
``for i in tf.range(n)`` loop seeded by ``seed + tf.stack([i, 0])``.

Uniform floats and integers must match bit for bit; normals within float32 rounding of log/sin/cos.
Each program runs eagerly and under ``jax.jit``; ``jax.grad`` through noise matches a ``GradientTape``,
and a train step (the tape inside the ``tf.function``) imports and matches. Without x64, float64 and
int64 outputs are JAX's 32-bit ones; under ``jax.enable_x64`` they match exactly too. A gamma draw is
refused, and the message names the stateless ops as the way out. (The stateful kernels of
``tf.random.uniform``, ``normal`` and ``shuffle``: ``tests/test_tf2_random_kernels.py``.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta.errors import UnimplementedError  # noqa: E402
from jta.graph_import import supported_ops, supported_tf2_ops  # noqa: E402

OPS = ("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg", "StatelessRandomGetAlg",
       "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2",
       "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2", "StatelessRandomUniform",
       "StatelessRandomNormal", "StatelessTruncatedNormal", "StatelessRandomUniformInt",
       "StatelessRandomUniformFullInt", "StatelessMultinomial")
SEEDS = [np.array(s, np.int32) for s in ([3, -7], [0, 0], [-1, 2**31 - 1], [-2**31, 12345])]


def _spec(a: np.ndarray) -> Any:
    return tf.TensorSpec(a.shape, tf.as_dtype(a.dtype))


def _both(build: Any, *args: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """TensorFlow's outputs of ``build``'s tf.function, and jta's eagerly then under jit (concatenated).
    (Autograph only where there is Python control flow: it cannot parse lambdas that share a line.)"""
    f = tf.function(build, input_signature=[_spec(a) for a in args], autograph=build in (_noisy, _in_loop))
    want = [np.asarray(w) for w in tf.nest.flatten(f(*args))]
    fn, params = jta.import_function(f, *args)
    got = [np.asarray(g) for call in (fn, jax.jit(fn)) for g in jax.tree_util.tree_leaves(call(params, *args))]
    return got, want * 2


def _exact(build: Any, *args: np.ndarray, names: Any = None) -> None:
    got, want = _both(build, *args)
    names = list(names or range(len(want) // 2)) * 2
    for a, b, name in zip(got, want, names, strict=True):
        # (int64 is JAX's int32 without x64, float64 its float32: a categorical's classes, constants)
        assert a.dtype == jax.dtypes.canonicalize_dtype(b.dtype) and a.shape == b.shape, (name, a.dtype, b.dtype)
        if a.dtype != b.dtype:
            np.testing.assert_array_equal(a, b.astype(a.dtype), err_msg=str(name))
        else:  # (the bits: bfloat16, -0.0)
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=str(name))


def _near(build: Any, *args: np.ndarray, names: Any = None, rtol: float = 1e-5) -> None:
    """Within ``rtol`` (and a tenth of it absolute); float64 is float32 without x64."""
    got, want = _both(build, *args)
    names = list(names or range(len(want) // 2)) * 2
    for a, b, name in zip(got, want, names, strict=True):
        assert a.shape == b.shape and a.dtype == jax.dtypes.canonicalize_dtype(b.dtype), (name, a.dtype, b.dtype)
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=rtol / 10,
                                   err_msg=str(name))


def _group(cases: dict[str, tuple[Any, int]]) -> tuple[list[str], Any]:
    """One tf.function of all ``cases`` (name: (build of a seed, index into SEEDS)): one trace, one
    compilation (the file's time is mostly XLA compiling)."""
    names = sorted(cases)

    def build(*seeds: Any) -> Any:
        return tuple(cases[n][0](seeds[cases[n][1]]) for n in names)
    return names, build


def test_the_ops_are_registered_for_both_importers():
    assert set(OPS) <= set(supported_tf2_ops()) and set(OPS) <= set(supported_ops())


UNIFORM = {
    "float32": (lambda s: tf.random.stateless_uniform([5, 3], seed=s), 0),
    "float32-range": (lambda s: tf.random.stateless_uniform([7], seed=s, minval=-2.0, maxval=3.0), 2),
    "float16": (lambda s: tf.random.stateless_uniform([9], seed=s, dtype=tf.float16), 1),
    "bfloat16": (lambda s: tf.random.stateless_uniform([2, 3], seed=s, dtype=tf.bfloat16), 3),
    "int32": (lambda s: tf.random.stateless_uniform([11], seed=s, minval=-5, maxval=17, dtype=tf.int32), 0),
    "int32-wide": (lambda s: tf.random.stateless_uniform([6], seed=s, minval=-2**31, maxval=2**31 - 1,
                                                          dtype=tf.int32), 2),
    "full-uint32": (lambda s: tf.random.stateless_uniform([9], seed=s, minval=None, maxval=None,
                                                          dtype=tf.uint32), 3),
    "full-int32": (lambda s: tf.random.stateless_uniform([3, 3], seed=s, minval=None, maxval=None,
                                                         dtype=tf.int32), 1),
    "empty": (lambda s: tf.random.stateless_uniform([0, 4], seed=s), 0),
    "split": (lambda s: tf.random.split(s, 3), 2),
    "fold-in": (lambda s: tf.random.fold_in(s, 5), 3),
    "categorical": (lambda s: tf.random.stateless_categorical(
        tf.math.log([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]), 5, seed=s), 0),
    "categorical-inf": (lambda s: tf.random.stateless_categorical(
        [[0.0, -np.inf, 1.0, 2.0]], 7, seed=s, dtype=tf.int32), 2),
    "v1-uniform": (lambda s: tf.raw_ops.StatelessRandomUniform(shape=[7], seed=s), 1),
    "v1-int": (lambda s: tf.raw_ops.StatelessRandomUniformInt(shape=[5], seed=s, minval=-4, maxval=9), 2),
    "v1-full-int": (lambda s: tf.raw_ops.StatelessRandomUniformFullInt(shape=[5], seed=s, dtype=tf.uint32),
                    3),
}


def test_uniform_and_integer_draws_match_bit_for_bit():
    names, build = _group(UNIFORM)
    _exact(build, *SEEDS, names=names)


def test_constant_seeds_compute_statically_also_large_int64_ones_and_alg_philox():
    def build() -> Any:
        big = tf.constant([2**40 + 3, -2**50 - 1], tf.int64)
        return (tf.random.stateless_uniform([6], seed=big),
                tf.random.stateless_uniform([5], seed=[4, 5], alg="philox"),
                tf.random.stateless_uniform([3], seed=big, minval=-3, maxval=1000, dtype=tf.int64),
                tf.random.stateless_normal([5], seed=[-9, 2**31 - 1], dtype=tf.float64))
    _exact(build)  # (a constant seed computes in numpy, which has the 64-bit types)


NORMAL = {
    "normal": (lambda s: tf.random.stateless_normal([7], seed=s), 0),
    "normal-1": (lambda s: tf.random.stateless_normal([1], seed=s), 1),
    "normal-large": (lambda s: tf.random.stateless_normal([41, 13], seed=s, mean=1.0, stddev=2.0), 2),
    "normal-float16": (lambda s: tf.random.stateless_normal([5], seed=s, dtype=tf.float16), 3),
    "truncated": (lambda s: tf.random.stateless_truncated_normal([9], seed=s), 0),
    "truncated-large": (lambda s: tf.random.stateless_truncated_normal([1003], seed=s), 3),
    "truncated-bfloat16": (lambda s: tf.random.stateless_truncated_normal([6], seed=s, dtype=tf.bfloat16),
                           2),
    "v1-normal": (lambda s: tf.raw_ops.StatelessRandomNormal(shape=[6], seed=s), 1),
    "v1-truncated": (lambda s: tf.raw_ops.StatelessTruncatedNormal(shape=[7], seed=s), 2),
}
FLOAT64 = {
    "float64-uniform": (lambda s: tf.random.stateless_uniform([7], seed=s, dtype=tf.float64), 0),
    "float64-normal": (lambda s: tf.random.stateless_normal([5], seed=s, dtype=tf.float64), 1),
    "float64-truncated": (lambda s: tf.random.stateless_truncated_normal([3], seed=s, dtype=tf.float64), 3),
}


@pytest.mark.long_only  # (3 s; tests/test_tf2_random_kernels.py draws normals by default)
def test_normal_draws_match_within_float32_rounding():
    """Box-Muller's log/sin/cos are JAX's, not glibc's: equal within an ulp or two."""
    names, build = _group(NORMAL)
    _near(build, *SEEDS, names=names)


def test_float64_draws_without_x64_are_float32_near_tensorflow():
    """Without x64 a float64 draw is computed in float32 (the float32 rounding of a uniform near 1 shows
    in its log: rtol 5e-5)."""
    names, build = _group(FLOAT64)
    _near(build, *SEEDS, names=names, rtol=5e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_truncated_normal_groups_that_need_more_draws_get_them(dtype):
    """The truncated normal draws a few blocks a group and draws again where a group fell short (never
    seen with the default count): with one block a group, a sixth of the groups fall short."""
    from jta.graph_import import _ops_random
    from jta.graph_import._nodes import Node
    node = Node("t", "StatelessTruncatedNormal", (), (), {})
    want = tf.raw_ops.StatelessTruncatedNormal(shape=[50], seed=SEEDS[0], dtype=tf.as_dtype(dtype)).numpy()

    def draw(seed: Any) -> Any:
        with np.errstate(over="ignore"):  # (the op's wrapper's: uint32 arithmetic wraps)
            key, counter = _ops_random.seed_key_counter(node, seed)
            return _ops_random._truncated(key, counter, 50, dtype, tries=1)
    # (a wrong pick would be off by far more than an ulp of sin/cos/log)
    np.testing.assert_allclose(draw(SEEDS[0]), want, rtol=1e-6, atol=1e-7)  # numpy, a loop
    np.testing.assert_allclose(jax.jit(draw)(SEEDS[0]), want, rtol=5e-5, atol=5e-6)  # a lax.cond


@pytest.mark.long_only  # (2 s; the split test runs under x64 by default)
def test_64_bit_outputs_and_traced_int64_seeds_match_exactly_under_x64():
    seed = np.array([2**40 + 3, -2**50 - 1], np.int64)

    def build(s: Any) -> Any:
        return (tf.random.stateless_uniform([5], seed=s, dtype=tf.float64),
                tf.random.stateless_truncated_normal([3], seed=s, dtype=tf.float64),
                tf.random.stateless_uniform([5], seed=s, minval=-3, maxval=2**40, dtype=tf.int64),
                tf.random.stateless_uniform([3], seed=s, minval=None, maxval=None, dtype=tf.uint64),
                tf.random.stateless_uniform([4], seed=s, alg="philox"))
    with jax.enable_x64(True):
        _exact(build, seed)


def test_int64_draws_without_x64_are_their_low_32_bits():
    """(Their values fit: the same numbers. The 64-bit ``bits % range`` is a long division in uint32,
    here of a range over 2**31 too.)"""
    def build(s: Any) -> Any:
        return (tf.random.stateless_uniform([5], seed=s, minval=-3, maxval=1000, dtype=tf.int64),
                tf.random.stateless_uniform([7], seed=s, minval=-2**31, maxval=2**31 - 1, dtype=tf.int64))
    got, want = _both(build, SEEDS[2])
    for a, b in zip(got, want, strict=True):
        assert a.dtype == np.int32
        np.testing.assert_array_equal(a, b)


def test_alg_philox_with_a_traced_seed_without_x64_is_refused_naming_x64():
    f = tf.function(lambda s: tf.random.stateless_uniform([4], seed=s, alg="philox"),
                    input_signature=[_spec(SEEDS[0])])
    fn, params = jta.import_function(f, SEEDS[0])
    with pytest.raises(UnimplementedError, match="jax_enable_x64"):
        fn(params, SEEDS[0])


def test_split_of_a_traced_seed_without_x64_is_refused_naming_x64_and_runs_with_it():
    """``stateless_split`` draws full-range int64 seeds: cut to 32 bits they would key other streams."""
    seed = np.array([3, -7], np.int64)
    f = tf.function(lambda s: tf.random.stateless_normal([3], seed=tf.random.experimental.stateless_split(s)[1]),
                    input_signature=[tf.TensorSpec([2], tf.int64)])
    fn, params = jta.import_function(f, seed)
    with pytest.raises(UnimplementedError, match="stateless_split.*jax_enable_x64"):
        jax.jit(fn)(params, seed)
    with jax.enable_x64(True):
        np.testing.assert_allclose(jax.jit(fn)(params, seed), f(seed), rtol=1e-6)


def test_threefry_is_refused():
    f = tf.function(lambda s: tf.raw_ops.StatelessRandomUniformV2(
        shape=[4], key=tf.constant([7], tf.uint64), counter=tf.constant([0, 0], tf.uint64), alg=2),
        input_signature=[_spec(SEEDS[0])])
    with pytest.raises(UnimplementedError, match="ThreeFry"):
        fn, params = jta.import_function(f, SEEDS[0])
        fn(params, SEEDS[0])


def test_a_binomial_draw_is_refused_naming_the_stateless_ops():
    f = tf.function(lambda x: x * tf.random.stateless_binomial([3], [1, 2], 5.0, 0.5, output_dtype=tf.float32),
                    input_signature=[tf.TensorSpec([3], tf.float32)])
    with pytest.raises(UnimplementedError) as info:
        fn, params = jta.import_function(f, np.ones(3, np.float32))
        fn(params, np.ones(3, np.float32))
    for needle in ("StatelessRandomBinomial", "stateless", "explicit seed", "as arguments"):
        assert needle in str(info.value), needle


# -- gradients through noise ------------------------------------------------------------------------
def _noisy(x: Any, seed: Any) -> Any:
    noise = tf.random.stateless_normal(tf.shape(x), seed=seed)
    return tf.nn.experimental.stateless_dropout(x * (1.0 + 0.1 * noise), 0.3, seed=seed + 1)


def _in_loop(x: Any, seed: Any) -> Any:
    """The shape of ``stateless_random_in_loop`` (scratch/redteam_cf/progs3.py): noise seeded by the step."""
    ta = tf.TensorArray(tf.float32, size=4)
    h = x
    for i in tf.range(4):
        s = seed + tf.stack([i, 0])
        noise = tf.random.stateless_normal([3], seed=s)
        u = tf.random.stateless_uniform([3], seed=s + 1)
        keep = tf.cast(u > 0.3, tf.float32)
        h = tf.tanh(h * 1.5 + 0.1 * noise) * keep
        ta = ta.write(i, h)
    return ta.stack()


@pytest.mark.parametrize("build", [_noisy, pytest.param(_in_loop, marks=pytest.mark.long_only)],
                         ids=["dropout", "loop"])  # (the loop: 4 s, under --long)
def test_programs_with_noise_forward_grad_and_train_step(build):
    x = np.linspace(-1, 1, 3).astype(np.float32)
    seed = SEEDS[0]
    _near(build, x, seed)
    fn, params = jta.import_function(tf.function(build, input_signature=[_spec(x), _spec(seed)]), x, seed)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = tf.reduce_sum(build(xt, seed) ** 2)
    want = tape.gradient(loss, xt).numpy()
    got = jax.jit(jax.grad(lambda v: jnp.sum(fn(params, v, seed) ** 2)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    v = tf.Variable(x, name="v")

    @tf.function(input_signature=[_spec(seed)])
    def step(s: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(build(v, s) ** 2)
        return loss, tape.gradient(loss, v)
    want_step = [w.numpy() for w in step(seed)]
    step_fn, step_params = jta.import_function(step, seed)
    for a, b in zip(jax.jit(step_fn)(step_params, seed), want_step, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)

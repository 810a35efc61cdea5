"""Gamma and Poisson draws (``tf.random.stateless_gamma`` / ``gamma`` / ``stateless_poisson`` / ``poisson``):
TensorFlow's values (bit for bit where the inputs are known or under ``jax_enable_x64``, within float32
rounding when traced without it), stateful kernels stepped call after call as TensorFlow's, ``jax.grad``
with respect to ``alpha`` as the tape's (``RandomGammaGrad``), TensorFlow's errors, and the use cases:
mixup (``Beta(a, a)`` from two gammas) in a train step, a Dirichlet draw."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402

_ALPHA = np.array([0.3, 1.0, 2.5, 40.0, 0.05], np.float32)  # (below 1: boosted; 1: exponential)
_SEED = np.array([3, 7], np.int32)


def _same(got: Any, want: Any, exact: bool) -> None:
    """Equal outputs, or (traced draws without x64) within float32 rounding of the double arithmetic."""
    for a, b in zip(jax.tree_util.tree_leaves(got), tf.nest.flatten(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        if exact or a.dtype.kind in "iu":
            np.testing.assert_array_equal(a, b.astype(a.dtype))
        else:
            np.testing.assert_allclose(a, b.astype(a.dtype), rtol=2e-5, atol=1e-30)


def _stateless(a: Any, seed: Any) -> Any:
    return (tf.random.stateless_gamma([40, 5], seed, a), tf.random.stateless_poisson([30, 5], seed, a * 7),
            tf.random.stateless_gamma([3, 0], seed, a[:0]), tf.random.stateless_poisson([0], seed, 2.0))


def _stateless_dtypes(a: Any, seed: Any) -> Any:
    return (tf.random.stateless_gamma([6, 5], seed, tf.cast(a, tf.float64), dtype=tf.float64),
            tf.random.stateless_gamma([6, 5], seed, tf.cast(a, tf.float16), dtype=tf.float16),
            tf.random.stateless_poisson([6, 5], seed, a * 3 + 8, dtype=tf.float32),
            tf.random.stateless_poisson([6, 5], seed, tf.cast(a * 3, tf.float16), dtype=tf.int64),
            tf.random.stateless_gamma([2, 3], seed, [[1.5], [0.5]], beta=[2.0, 1.0, 4.0]))


@pytest.mark.parametrize("build", [_stateless, pytest.param(_stateless_dtypes, marks=pytest.mark.long_only)])
def test_stateless_draws_are_tensorflows(build: Any) -> None:
    """Known inputs (a constant seed, eager arguments) draw in double precision: TensorFlow's values;
    under ``jit`` (traced alpha and seed, no x64) within float32 rounding, the integer counts equal.
    Every output type (half, float, double; Poisson's integers) and a ``beta``."""
    f = tf.function(build)
    want = f(_ALPHA, _SEED)
    fn, params = jta.import_function(f, _ALPHA, _SEED)
    _same(fn(params, _ALPHA, _SEED), want, exact=True)
    _same(jax.jit(fn)(params, _ALPHA, _SEED), want, exact=False)


def test_under_x64_traced_draws_are_tensorflows() -> None:
    """With ``jax_enable_x64`` the traced draws compute in double as TensorFlow's kernels do: float32
    outputs equal (float64 ones within an ulp or so of XLA's log/pow/sin against glibc's)."""
    f = tf.function(lambda a, seed: (tf.random.stateless_gamma([40, 5], seed, a),
                                     tf.random.stateless_poisson([30, 5], seed, a * 7 + 3, dtype=tf.int64),
                                     tf.random.stateless_poisson([30, 5], seed, a * 7, dtype=tf.float16)))
    want = f(_ALPHA, _SEED)
    with jax.enable_x64(True):
        fn, params = jta.import_function(f, _ALPHA, _SEED)
        got = jax.jit(fn)(params, _ALPHA, _SEED)
        assert got[1].dtype == np.int64
        _same(got, want, exact=True)


def _stateful_calls(make: Any, args: tuple[Any, ...], calls: int, eager_exact: bool = True) -> None:
    """``make()`` (a tf.function made after ``tf.random.set_seed``) imported and called ``calls`` times
    threading ``params``, eagerly (equal where the draws' inputs are known) and under ``jit`` (traced:
    within float32 rounding), against a fresh TensorFlow function called as often."""
    tf.random.set_seed(5)
    fn, params = jta.import_function(make(), *args, with_updates=True)
    for run, same in ((fn, eager_exact), (jax.jit(fn), False)):
        tf.random.set_seed(5)
        reference, p = make(), dict(params)
        for _ in range(calls):
            out, p = run(p, *args)
            _same(out, reference(*args), same)


def test_stateful_kernels_step_as_tensorflows() -> None:
    """``tf.random.gamma`` and ``tf.random.poisson`` (``RandomGamma``, ``RandomPoissonV2``): each kernel's
    generator reserves 256 blocks an output; three calls draw TensorFlow's three results."""
    def make() -> Any:
        @tf.function
        def f(a: Any) -> Any:
            return tf.random.gamma([4], a, beta=2.0), tf.random.poisson([5], a * 6, dtype=tf.int32)
        return f

    _stateful_calls(make, (_ALPHA,), calls=2)


@pytest.mark.long_only
def test_a_loop_carries_the_kernels_generator() -> None:
    """Draws in a loop's body: each generator steps once an iteration, as TensorFlow's kernel. (Not a
    ``map_fn``: TensorFlow runs its independent iterations in parallel, drawing in no fixed order.)"""
    def make() -> Any:
        @tf.function
        def f(x: Any) -> Any:
            s = tf.zeros([3])
            for _ in tf.range(3):
                s += x * tf.random.gamma([3], 2.0) + tf.random.poisson([], x * 4)
            return s
        return f

    _stateful_calls(make, (np.arange(1, 4, dtype=np.float32),), calls=2, eager_exact=False)  # (a carried state)


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    return np.cos(np.arange(int(np.prod(shape)), dtype=np.float32)).reshape(shape)


@pytest.mark.parametrize("stateful", [False, pytest.param(True, marks=pytest.mark.long_only)])
def test_gradient_with_respect_to_alpha_is_the_tapes(stateful: bool) -> None:
    """``jax.grad`` through a gamma draw: ``RandomGammaGrad(alpha, sample)`` times the incoming gradient,
    summed over the sample dimensions, as TensorFlow's ``_RandomGammaGrad`` /
    ``_StatelessRandomGammaV3Grad``; and the same gradient from a tape inside the imported function."""
    def draw(a: Any, seed: Any) -> Any:
        if stateful:
            return tf.random.gamma([6], a, seed=9)
        return tf.random.stateless_gamma([6, 5], seed, a)

    w = _weights((6, 5))

    def make() -> Any:
        @tf.function
        def step(a: Any, seed: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(a)
                loss = tf.reduce_sum(w * draw(a, seed))
            return loss, tape.gradient(loss, a)
        return step

    tf.random.set_seed(1)
    alpha = tf.constant(_ALPHA)
    with tf.GradientTape() as tape:
        tape.watch(alpha)
        loss = tf.reduce_sum(w * draw(alpha, _SEED))
    want = tape.gradient(loss, alpha).numpy()

    tf.random.set_seed(1)
    f = tf.function(draw)
    fn, params = jta.import_function(f, _ALPHA, _SEED)
    got = jax.jit(jax.grad(lambda a: jnp.sum(w * fn(params, a, _SEED))))(_ALPHA)
    np.testing.assert_allclose(got, want, rtol=1e-4)

    tf.random.set_seed(1)
    step, p = jta.import_function(make(), _ALPHA, _SEED)
    tf.random.set_seed(1)
    _same(jax.jit(step)(p, _ALPHA, _SEED), make()(_ALPHA, _SEED), exact=False)


@pytest.mark.parametrize("loop", ["range", pytest.param("scan", marks=pytest.mark.long_only)])
def test_gradient_of_draws_seeded_in_a_loop(loop: str) -> None:
    """A draw seeded from the loop's counter in a ``tf.range`` loop or a ``tf.scan`` (red-team batch 20: its
    derivative closed over the body's traced draws, and ``jax.grad`` raised JAX's ``UnexpectedTracerError``)."""
    w = _weights((4, 3))

    @tf.function
    def f(a: Any) -> Any:
        if loop == "scan":
            return tf.reduce_sum(tf.scan(lambda acc, t: acc + w * tf.random.stateless_gamma([4, 3], tf.stack([t, 5]), a),
                                         tf.range(3), tf.zeros([4, 3]))[-1])
        total = tf.zeros([4, 3])
        for t in tf.range(3):
            total += w * tf.random.stateless_gamma([4, 3], tf.stack([t, 5]), a)
        return tf.reduce_sum(total)

    alpha = tf.constant(_ALPHA[:3])
    with tf.GradientTape() as tape:
        tape.watch(alpha)
        loss = f(alpha)
    want = tape.gradient(loss, alpha).numpy()
    fn, params = jta.import_function(f, _ALPHA[:3])
    grad = jax.grad(lambda a: fn(params, a))
    for g in (grad, jax.jit(grad)):
        np.testing.assert_allclose(g(_ALPHA[:3]), want, rtol=1e-4)


def test_poisson_has_no_gradient() -> None:
    """``StatelessRandomPoisson`` is not differentiable in TensorFlow (zeros to ``jax.grad``)."""
    f = tf.function(lambda lam: tf.random.stateless_poisson([4, 2], [1, 2], lam, dtype=tf.float32))
    lam = np.array([3.0, 30.0], np.float32)
    fn, params = jta.import_function(f, lam)
    np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(fn(params, x)))(lam), 0)


@pytest.mark.filterwarnings("ignore:.*steps random generators")
def test_stateful_poisson_has_no_gradient_entry() -> None:
    """``RandomPoissonV2`` has no entry in TensorFlow's registry: a gradient reaching it raises LookupError."""
    f = tf.function(lambda lam: tf.random.poisson([4], lam, seed=2))
    lam = np.array([3.0, 30.0], np.float32)
    with pytest.raises(LookupError, match="RandomPoissonV2"):
        with tf.GradientTape() as tape:
            x = tf.constant(lam)
            tape.watch(x)
            y = tf.reduce_sum(f(x))
        tape.gradient(y, x)
    fn, params = jta.import_function(f, lam)
    with pytest.raises(LookupError, match="no entry for: RandomPoissonV2"):
        jax.grad(lambda x: jnp.sum(fn(params, x)))(lam)


def _mixup_step(w: Any, x: Any, y: Any, step: Any, a: Any) -> Any:
    """A mixup train step: ``lam ~ Beta(a, a)`` from two gammas (seeded by the step), batches mixed with
    their reversal, the loss's gradient with respect to the weights."""
    seed = tf.stack([step, 0])
    g1 = tf.random.stateless_gamma([1], seed, a)
    g2 = tf.random.stateless_gamma([1], seed + [0, 1], a)
    lam = g1 / (g1 + g2)
    xm, ym = lam * x + (1 - lam) * x[::-1], lam * y + (1 - lam) * y[::-1]
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = tf.reduce_mean(tf.square(tf.matmul(xm, w) - ym))
    return loss, tape.gradient(loss, w), lam


def test_mixup_train_step() -> None:
    f = tf.function(_mixup_step)
    rng = np.random.default_rng(0)
    w, x, y = (rng.standard_normal(s).astype(np.float32) for s in ((3, 2), (8, 3), (8, 2)))
    a = np.float32(0.4)
    fn, params = jta.import_function(f, w, x, y, np.int32(0), a)
    run = jax.jit(fn)
    for step in range(3):
        want = f(w, x, y, np.int32(step), a)
        got = fn(params, w, x, y, np.int32(step), a)
        _same(got[2], want[2], exact=True)  # (lam; the loss and gradient within matmul's rounding)
        _same(got[:2], want[:2], exact=False)
        _same(run(params, w, x, y, np.int32(step), a), want, exact=False)


def test_dirichlet_draw() -> None:
    """A Dirichlet draw: gammas of the concentrations, normalized (the gammas equal, the division within
    its rounding); rows sum to 1. (Eagerly: the traced draws are the other tests'.)"""
    f = tf.function(lambda c, seed: (lambda g: (g, g / tf.reduce_sum(g, -1, keepdims=True)))(
        tf.random.stateless_gamma([16, 4], seed, c)))
    c = np.array([0.5, 1.0, 2.0, 7.0], np.float32)
    fn, params = jta.import_function(f, c, _SEED)
    want = f(c, _SEED)
    got = fn(params, c, _SEED)
    _same(got[0], want[0], exact=True)
    _same(got[1], want[1], exact=False)
    np.testing.assert_allclose(np.sum(got[1], -1), 1, rtol=1e-6)


@pytest.mark.parametrize("build, error", [
    (lambda: tf.raw_ops.StatelessRandomGammaV2(shape=[3, 2], seed=[1, 2], alpha=tf.ones([3])),
     "Shape passed in must end with broadcasted shape."),
    (lambda: tf.raw_ops.StatelessRandomGammaV2(shape=[-1, 2], seed=[1, 2], alpha=tf.ones([2])),
     "Dimension -1 must be >= 0"),
    (lambda: tf.raw_ops.StatelessRandomPoisson(shape=[3, 2], seed=[1, 2], lam=tf.ones([3]), dtype=tf.int32),
     "Shape passed in must end with broadcasted shape."),
])
def test_bad_inputs_raise_tensorflows_errors(build: Any, error: str) -> None:
    f = tf.function(build)
    with pytest.raises(tf.errors.InvalidArgumentError, match=_escaped(error)):
        f()
    with pytest.raises(jta.errors.InvalidArgumentError, match=_escaped(error)):
        fn, params = jta.import_function(f)
        fn(params)


def test_parameters_at_the_edges_draw_tensorflows_values() -> None:
    """Negative, zero, infinite and NaN ``alpha`` (NaN and infinite draws, the ``tiny`` floor), a
    negative rate (0), a rate of a million, an infinite one: TensorFlow's values."""
    f = tf.function(lambda a, lam, seed: (tf.random.stateless_gamma([4, 6], seed, a),
                                          tf.random.stateless_poisson([4, 4], seed, lam, dtype=tf.float32)))
    args = (np.array([-0.5, -1.0, 0.0, np.inf, np.nan, 1e-3], np.float32), np.array([-3.0, 0.0, 1e6, np.inf], np.float32),
            _SEED)
    fn, params = jta.import_function(f, *args)
    _same(fn(params, *args), f(*args), exact=True)


def test_empty_draws_need_no_valid_parameters() -> None:
    """An output without elements draws nothing and checks nothing more (TensorFlow's early return)."""
    f = tf.function(lambda: (tf.raw_ops.StatelessRandomGammaV2(shape=[3, 0], seed=[1, 2], alpha=tf.ones([2])),
                             tf.raw_ops.RandomGamma(shape=[3], alpha=tf.ones([0]))))
    fn, params = jta.import_function(f)
    _same(fn(params), f(), exact=True)


def _escaped(text: str) -> str:
    import re
    return re.escape(text)


@pytest.mark.long_only
def test_many_draws_agree() -> None:
    """Many draws of many parameters (both Poisson algorithms, every gamma branch), traced without x64:
    within float32 rounding; with x64, float32 draws equal."""
    alpha = np.geomspace(0.01, 300, 40).astype(np.float32)
    f = tf.function(lambda a, seed: (tf.random.stateless_gamma([500, 40], seed, a),
                                     tf.random.stateless_poisson([500, 40], seed, a, dtype=tf.int32)))
    want = f(alpha, _SEED)
    fn, params = jta.import_function(f, alpha, _SEED)
    _same(fn(params, alpha, _SEED), want, exact=True)
    got = jax.jit(fn)(params, alpha, _SEED)
    np.testing.assert_array_equal(got[1], want[1])
    close = np.isclose(got[0], want[0], rtol=2e-5, atol=0)
    assert close.mean() > 0.9999, np.argwhere(~close)
    with jax.enable_x64(True):
        fn, params = jta.import_function(f, alpha, _SEED)
        _same(jax.jit(fn)(params, alpha, _SEED), want, exact=True)

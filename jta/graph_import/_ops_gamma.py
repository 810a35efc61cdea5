"""TensorFlow's gamma and Poisson draws: ``tf.random.stateless_gamma`` (``StatelessRandomGammaV2``/``V3``),
``tf.random.gamma`` (``RandomGamma``, a stateful kernel), ``tf.random.stateless_poisson``
(``StatelessRandomPoisson``) and ``tf.random.poisson`` (``RandomPoisson``/``RandomPoissonV2``, stateful).

Their CPU kernels (``random_op.cc``'s ``RandomGammaOp``, ``stateless_random_gamma_op.cc``,
``random_poisson_op.cc``'s ``PoissonFunctor``) reject, so each output draws a variable number of values.
To stay independent of the threads' split, output ``i`` (outputs ordered parameter-major: ``i = p * S + s``
for sample ``s`` of parameter ``p``, stored at ``[s, p]``) starts its own generator at block
``counter + 256 i`` (``kReservedSamplesPerOutput``) and draws blocks from there as it needs them.
All the arithmetic is in double, whatever the output type:

* Gamma (Marsaglia and Tsang): ``d = alpha - 1/3`` (``alpha + 2/3`` where ``alpha < 1``), ``c = 1 / 3 /
  sqrt(d)``; an attempt takes a normal ``x`` (double normals come two a block, Box-Muller of its four
  words, used last first), rejects ``v = 1 + c x <= 0``, then takes a uniform ``u`` (two doubles a block,
  last first, from their own buffer) and accepts ``d v**3`` where ``u < 1 - 0.0331 x**4`` or ``log u <
  x**2 / 2 + d (1 - v**3 + log v**3)``; below 1, the accepted value is boosted by ``u'**(1 / alpha)``, one more
  uniform. ``alpha == 1`` is an exponential of the first block's second uniform (``-log1p(-u)``; the stateful
  kernel's ``-log(1 - u)``).
* Poisson, ``rate < 10`` (Knuth): the number of uniforms (last first, two a block) whose running product
  stays above ``exp(-rate)``. ``rate >= 10`` (Hormann's transformed rejection): each attempt takes a block,
  ``u`` its second uniform minus 1/2, ``v`` its first, ``k = floor((2a / (1/2 - |u|) + b) u + rate +
  0.43)``, accepted by a box test or by ``log(v inv_alpha / (a / us**2 + b)) <= -rate + k log(rate) -
  lgamma(k + 1)``; a ``k`` above the output type's largest value is drawn again. (A NaN rate, on which
  TensorFlow's kernel never returns, draws NaN.)

A rejection loop runs over all outputs at once (``lax.while_loop``; a numpy loop where every input is
known: a constant seed and parameters, an eager call's), each taking its next block only where its buffers
are empty. Where the inputs are known (numpy's doubles) or with ``jax_enable_x64`` the arithmetic is
TensorFlow's, so the draws are its own: float32, half and integer outputs equal (no difference in 10**5
draws of each), float64 ones within an ulp of glibc's log/sin/cos/pow in numpy (about 1e-14 relative in
XLA, whose pow is less exact). Without x64, JAX has no doubles: traced draws compute in float32 (the double
uniforms and normals rounded; the gamma test's ``1 - v**3 + log v**3`` from ``log1p``, the boost in log space
and the Poisson test's ``lgamma`` by Stirling's series, to keep their cancellation and underflow small), so
gamma values are within float32 rounding of TensorFlow's (about 1e-6 relative; up to 1e-5 as ``alpha``
falls to 0.01, where the boost's exponent ``1 / alpha`` amplifies the rounding of ``u``) and Poisson counts
equal, except where an acceptance test falls within that rounding of its bound (none in 10**5 draws of
either; possible in principle), which changes that output.

Gradients are TensorFlow's: the gamma draws' with respect to ``alpha`` is ``RandomGammaGrad(alpha, sample)``
times the incoming gradient, summed over the sample dimensions (implicit reparameterization, ``random_grad.py``);
the Poisson draws have none (``StatelessRandomPoisson`` is not differentiable, the stateful ops have no entry).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from . import _ops_checks, _ops_random, _ops_special, _random_kernels
from ._nodes import Node
from ._ops import OPS, is_static, registrar, xp_of

_reg = registrar(OPS)
_RESERVED = 256  # blocks each output may draw (kReservedSamplesPerOutput)
U32 = np.uint32


# -- the generators of the outputs ---------------------------------------------------------------------
def _starts(xp: Any, counter: _ops_random.Words, n: int) -> _ops_random.Words:
    """Each output's first counter: ``counter + 256 i`` (``gen.Skip(kReservedSamplesPerOutput * i)``)."""
    return _ops_random.skip(tuple(xp.asarray(c, U32) for c in counter), np.arange(n, dtype=np.int64) * _RESERVED)


def _block(key: _ops_random.Words, starts: _ops_random.Words, taken: Any) -> tuple[Any, ...]:
    """The four words of each output's next block: ``taken`` (uint32) blocks after its start, carried
    into the higher words as ``PhiloxRandom::Skip`` carries."""
    c0, c1, c2, c3 = starts
    c0 = c0 + taken
    carry = (c0 < taken).astype(U32)
    c1 = c1 + carry
    carry = carry & (c1 == 0).astype(U32)
    c2 = c2 + carry
    c3 = c3 + (carry & (c2 == 0).astype(U32))
    return tuple(_ops_random.philox(key, (c0, c1, c2, c3)))


def _uniforms(words: tuple[Any, ...]) -> tuple[Any, Any]:
    """``UniformDistribution<double>``: two doubles a block (float32 without x64)."""
    return _ops_random.uint64_to_double(words[0], words[1]), _ops_random.uint64_to_double(words[2], words[3])


def _normals(words: tuple[Any, ...]) -> tuple[Any, Any]:
    """``NormalDistribution<double>``: Box-Muller of the block's four words."""
    return _ops_random.box_muller_double(xp_of(words[0]).stack(words, axis=-1))


def _take(xp: Any, use: Any, buffer: tuple[Any, Any, Any], fresh: Callable[[Any], tuple[Any, Any]],
          taken: Any) -> tuple[tuple[Any, Any, Any], Any, Any]:
    """The next value of a buffer ``(first, second, remaining)`` where ``use``: the last remaining first,
    as ``SampleBuffer`` and the kernels' ``UNIFORM`` take them, the buffer refilled from the next block
    (``fresh(taken)``) where empty. Returns the buffer, the value and the blocks taken."""
    first, second, remaining = buffer
    need = use & (remaining == 0)
    new_first, new_second = fresh(taken)
    first, second = xp.where(need, new_first, first), xp.where(need, new_second, second)
    remaining = xp.where(need, 2, remaining) - use.astype(remaining.dtype)
    return (first, second, remaining), xp.where(remaining == 1, second, first), taken + need.astype(U32)


def _loop(xp: Any, done: Callable[[Any], Any], body: Callable[[Any], Any], state: Any) -> Any:
    """``body`` until ``done``: a numpy loop, or ``lax.while_loop``."""
    if xp is np:
        while not np.all(done(state)):
            state = body(state)
        return state
    return jax.lax.while_loop(lambda s: ~jnp.all(done(s)), body, state)


def _lgamma(xp: Any, x: Any) -> Any:
    """``lgamma(x)``; in numpy 0 at the poles ``x <= 0`` (where a rejected ``k < 0`` does not use it)."""
    return _LGAMMA(np.where(x > 0, x, 1)) if xp is np else jax.lax.lgamma(x)


_LGAMMA = np.vectorize(math.lgamma, otypes=[np.float64])


def _cast(values: Any, dtype: Any) -> Any:
    """``static_cast<T>(double)``: Eigen's half and bfloat16 round through float."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize < 4:
        values = values.astype(np.float32)
    return values.astype(dtype if is_static(values) else jax.dtypes.canonicalize_dtype(dtype))


# -- gamma ----------------------------------------------------------------------------------------------
def _gamma_flat(alpha: Any, key: _ops_random.Words, counter: _ops_random.Words, samples: int,
                log1p: bool) -> Any:
    """Draws ``[samples, alphas]`` from the flat ``alpha`` (see the module's docstring): in numpy's
    doubles where ``alpha`` is numpy, else in JAX's widest float."""
    xp = xp_of(alpha)
    wide = _ops_random.has_64_bits(xp)
    ct = xp.float64 if wide else xp.float32
    alphas = alpha.shape[0]
    a = xp.repeat(alpha.astype(ct), samples)  # output i = p * samples + s
    starts = _starts(xp, counter, alphas * samples)
    small = a < 1
    d = a + xp.where(small, ct(2.0 / 3), ct(-1.0 / 3))
    c = ct(1.0 / 3) / xp.sqrt(d)
    zero, n = xp.zeros_like(a), a.shape[0]
    empty = (zero, zero, xp.zeros(n, np.int32))

    def normals(taken: Any) -> tuple[Any, Any]:
        return _normals(_block(key, starts, taken))

    def uniforms(taken: Any) -> tuple[Any, Any]:
        return _uniforms(_block(key, starts, taken))

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        taken, normal, uniform, done, result = state
        normal, x, taken = _take(xp, ~done, normal, normals, taken)
        w = c * x
        v = 1 + w
        live = ~done & ~(v <= 0)  # (a NaN goes on, as in TensorFlow's ``if (v <= 0) continue``)
        v3 = v * v * v
        uniform, u, taken = _take(xp, live, uniform, uniforms, taken)
        if wide:  # (TensorFlow's expression, in its precision)
            bound = ct(0.5) * x * x + d * (1 - v3 + xp.log(v3))
        else:  # (1 - v**3 + 3 log v without the cancellation of its terms near 1)
            bound = ct(0.5) * x * x + d * (3 * xp.log1p(w) - w * (3 + w * (3 + w)))
        accept = live & ((u < 1 - ct(0.0331) * (x * x) * (x * x)) | (xp.log(u) < bound))
        boost = accept & small
        uniform, b, taken = _take(xp, boost, uniform, uniforms, taken)
        if wide:
            value = d * v3 * xp.where(boost, xp.power(b, 1 / a), 1)
        else:  # (in log space: the boost of a small alpha underflows float32 before the product does)
            value = xp.where(boost, xp.exp(xp.log(d * v3) + xp.log(b) / a), d * v3)
        return taken, normal, uniform, done | accept, xp.where(accept, value, result)

    # alpha == 1: an exponential, of the first block's second uniform
    u = uniforms(xp.zeros(n, U32))[1]
    exponential = -xp.log1p(-u) if log1p else -xp.log(1 - u)
    one = a == 1
    state = (xp.zeros(n, U32), empty, empty, one, xp.where(one, exponential, zero))
    result = _loop(xp, lambda s: s[3], body, state)[4]
    return result.reshape(alphas, samples).T


def _gamma(alpha: Any, key: _ops_random.Words, counter: _ops_random.Words, shape: tuple[int, ...],
           dtype: Any, log1p: bool) -> Any:
    """Gamma draws of ``shape`` (``[..., *alpha.shape]``) in ``dtype``, differentiable in ``alpha`` as
    TensorFlow's gradient has it: ``RandomGammaGrad(alpha, sample)``, summed over the sample dimensions."""
    samples = int(np.prod(shape, dtype=np.int64)) // max(int(np.size(alpha)), 1)
    draw = _run(_gamma_flat, (samples, log1p), _flat(alpha), key, counter)
    if is_static(alpha):
        return _cast(draw, dtype).reshape(shape)

    # (the draws are an argument, not a closure: traced in a loop body, a closure's tracer would leak
    # out of the body's trace into the derivative's)
    @jax.custom_jvp
    def sample(a: Any, drawn: Any) -> Any:
        return _cast(drawn, dtype).reshape(shape)

    @sample.defjvp
    def _(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[Any, Any]:
        value = sample(*primals)
        a = jnp.broadcast_to(primals[0].astype(value.dtype), shape)
        return value, _ops_special.random_gamma_grad(a, value) * tangents[0].astype(value.dtype)

    return sample(jnp.asarray(alpha), jax.lax.stop_gradient(jnp.asarray(draw)))


def _flat(v: Any) -> Any:
    """A parameter, flat and without a derivative (numpy stays numpy: a float64 one keeps its precision)."""
    return np.reshape(v, -1) if is_static(v) else jax.lax.stop_gradient(jnp.reshape(v, -1))


# -- Poisson ------------------------------------------------------------------------------------------
def _poisson_flat(rate: Any, key: _ops_random.Words, counter: _ops_random.Words, samples: int,
                  highest: float) -> Any:
    """Draws ``[samples, rates]`` of the flat ``rate`` (see the module's docstring): in numpy's doubles
    where ``rate`` is numpy, else in JAX's widest float."""
    xp = xp_of(rate)
    wide = _ops_random.has_64_bits(xp)
    ct = xp.float64 if wide else xp.float32
    rates = rate.shape[0]
    r = xp.repeat(rate.astype(ct), samples)
    starts = _starts(xp, counter, rates * samples)
    n = r.shape[0]
    zero, top = xp.zeros(n, ct), ct(highest)

    def uniforms(taken: Any) -> tuple[Any, Any]:
        return _uniforms(_block(key, starts, taken))

    def knuth(state: tuple[Any, ...]) -> tuple[Any, ...]:
        taken, uniform, prod, x, done = state
        uniform, u, taken = _take(xp, ~done, uniform, uniforms, taken)
        prod = xp.where(done, prod, prod * u)
        stop = ~done & (prod <= xp.exp(-r)) & (x <= top)
        return taken, uniform, prod, xp.where(done | stop, x, x + 1), done | stop

    small = r < 10
    state = (xp.zeros(n, U32), (zero, zero, xp.zeros(n, np.int32)), xp.ones(n, ct), zero, ~small | xp.isnan(r))
    counted = _loop(xp, lambda s: s[4], knuth, state)[3]

    log_rate = xp.log(r)
    b = ct(0.931) + ct(2.53) * xp.sqrt(r)
    a = ct(-0.059) + ct(0.02483) * b
    inv_alpha = ct(1.1239) + ct(1.1328) / (b - ct(3.4))
    box = ct(0.9277) - ct(3.6224) / (b - 2)

    def hormann(state: tuple[Any, ...]) -> tuple[Any, ...]:
        taken, done, result = state
        live = ~done
        v, u = _uniforms(_block(key, starts, taken))  # (u the block's second uniform, v its first)
        u = u - ct(0.5)
        us = ct(0.5) - xp.abs(u)
        k = xp.floor((2 * a / us + b) * u + r + ct(0.43))
        live = live & ~(k > top)
        quick = live & (us >= ct(0.07)) & (v <= box)
        live = live & ~quick & ~((k < 0) | ((us < ct(0.013)) & (v > us)))
        s = xp.log(v * inv_alpha / (a / (us * us) + b))
        t = -r + k * log_rate - _lgamma(xp, k + 1) if wide else _log_poisson(r, k, log_rate)
        accept = quick | (live & (s <= t))
        return taken + (~done).astype(U32), done | accept, xp.where(accept, k, result)

    # (a NaN rate, on which TensorFlow's kernel never returns, draws NaN; an infinite one its infinity)
    state = (xp.zeros(n, U32), small | xp.isnan(r) | (r == np.inf), xp.where(r == np.inf, r, np.nan))
    result = xp.where(small, counted, _loop(xp, lambda s: s[1], hormann, state)[2])
    return result.reshape(rates, samples).T


def _log_poisson(rate: Any, k: Any, log_rate: Any) -> Any:
    """``-rate + k log(rate) - lgamma(k + 1)`` in float32 with less cancellation than its three large
    terms (about ``k log(rate)``'s rounding, 1e-4 at rate 1000, where Stirling's series leaves 1e-6):
    ``k log1p((rate - k) / k) + k - rate - log(2 pi k) / 2 - 1 / 12k + 1 / 360k**3`` for ``k >= 10``."""
    m = jnp.maximum(k, 10)
    series = m * jnp.log1p((rate - m) / m) + (m - rate) - jnp.log(2 * np.pi * m) / 2 - (1 - 1 / (30 * m * m)) / (12 * m)
    return jnp.where(k >= 10, series, -rate + k * log_rate - jax.lax.lgamma(k + 1))  # (JAX only: float32)


def _highest(dtype: Any) -> float:
    """``Eigen::NumTraits<U>::highest()`` of the output type."""
    dtype = np.dtype(dtype)
    return float(np.iinfo(dtype).max if dtype.kind in "iu" else np.finfo(dtype).max)


def _poisson(rate: Any, key: _ops_random.Words, counter: _ops_random.Words, shape: tuple[int, ...],
             dtype: Any) -> Any:
    samples = int(np.prod(shape, dtype=np.int64)) // max(int(np.size(rate)), 1)
    draw = _cast(_run(_poisson_flat, (samples, _highest(dtype)), _flat(rate), key, counter), dtype).reshape(shape)
    if is_static(rate) or not jnp.issubdtype(draw.dtype, jnp.floating):
        return draw
    # The counts do not depend differentiably on the rate, but a gradient reaches it, as TensorFlow's tape
    # reaches the op (and raises LookupError: RandomPoisson has no gradient; StatelessRandomPoisson's
    # rate arrives as a constant, not differentiable)
    return jnp.where(True, draw, jnp.broadcast_to(jnp.asarray(rate), shape).astype(draw.dtype))


# -- running: numpy's doubles for known inputs, one compiled program per op else ---------------------------
def _run(fn: Callable[..., Any], statics: tuple[Any, ...], *arrays: Any) -> Any:
    """``fn(*arrays, *statics)``: in numpy where every input is known (a constant seed and parameters, an
    eager call's), in double precision as TensorFlow's kernels (and with no program to compile); else
    jitted (cached per ``fn`` and ``statics``)."""
    leaves = jax.tree_util.tree_leaves(arrays)
    if all(is_static(v) or (isinstance(v, jax.Array) and not isinstance(v, Tracer)) for v in leaves):
        with np.errstate(all="ignore"):  # (the lanes of finished or rejected draws compute anything)
            return fn(*jax.tree_util.tree_map(np.asarray, arrays), *statics)
    return _compiled(fn, statics)(*arrays)


@functools.lru_cache(maxsize=128)
def _compiled(fn: Callable[..., Any], statics: tuple[Any, ...]) -> Callable[..., Any]:
    return jax.jit(lambda *arrays: fn(*arrays, *statics))


# -- the ops --------------------------------------------------------------------------------------------
def _stateless_shape(node: Node, shape: Any, param: Any, seed: Any = None) -> tuple[int, ...]:
    """A stateless op's output shape after its kernel's checks, in its order: the shape, the seed, then
    (only where it draws) the parameter's shape, which must end it."""
    dims = _ops_random.shape_of(node, shape)
    if seed is not None and np.shape(seed) != (2,):
        _ops_checks.invalid(node, f"seed must have shape [2], not [{','.join(map(str, np.shape(seed)))}]")
    size = int(np.prod(dims, dtype=np.int64))
    pshape = tuple(np.shape(param))
    if size and (len(pshape) > len(dims) or tuple(dims[len(dims) - len(pshape):]) != pshape):
        _ops_checks.invalid(node, "Shape passed in must end with broadcasted shape.")
    return dims


def _empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return np.zeros(shape, jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


@_reg("StatelessRandomGammaV2", "StatelessRandomGammaV3")
def _stateless_gamma(node: Node, args: list[Any]) -> list[Any]:
    """``tf.random.stateless_gamma``: V2 of (shape, seed, alpha), V3 of (shape, key, counter, alg, alpha)."""
    v3 = node.op.endswith("V3")
    alpha, dtype = args[-1], node.attr("dtype")
    shape = _stateless_shape(node, args[0], alpha, None if v3 else args[1])

    def run() -> Any:
        if not np.prod(shape, dtype=np.int64):
            return _empty(shape, dtype)
        key, counter = _ops_random.key_counter_v2(node, args) if v3 else \
            _ops_random.seed_key_counter(node, args[1])
        return _gamma(alpha, key, counter, shape, dtype, log1p=True)
    return [_ops_random.quietly(run)]


@_reg("StatelessRandomPoisson")
def _stateless_poisson(node: Node, args: list[Any]) -> list[Any]:
    """``tf.random.stateless_poisson``: (shape, seed, lam), counts in ``dtype`` (floats or integers)."""
    shape, dtype = _stateless_shape(node, args[0], args[2], args[1]), node.attr("dtype")

    def run() -> Any:
        if not np.prod(shape, dtype=np.int64):
            return _empty(shape, dtype)
        return _poisson(args[2], *_ops_random.seed_key_counter(node, args[1]), shape, dtype)
    return [_ops_random.quietly(run)]


def _stateful_shape(node: Node, shape: Any, param: Any) -> tuple[tuple[int, ...], int]:
    """A stateful op's output shape (``shape`` + the parameter's) and its number of outputs."""
    if np.ndim(shape) != 1:
        value = np.asarray(shape)
        _ops_checks.invalid(node, "shape must be a vector of {int32,int64}, got shape: Tensor<type: "
                                  f"{value.dtype} shape: [{','.join(map(str, value.shape))}] values: "
                                  f"{' '.join(map(str, value.reshape(-1)))}>")
    dims = (*_ops_random.shape_of(node, shape), *np.shape(param))
    return dims, int(np.prod(dims, dtype=np.int64))


@_random_kernels.register_kernel("RandomGamma")
def _random_gamma(node: Node, args: list[Any], state: Any) -> tuple[list[Any], Any]:
    """``tf.random.gamma``'s kernel: ``shape`` draws of each ``alpha``, from the kernel's generator, which
    reserves 256 blocks an output."""
    dims, size = _stateful_shape(node, args[0], args[1])
    if not size:
        return [_empty(dims, node.attr("T"))], state
    key, counter = _random_kernels.state_words(state)
    values = _ops_random.quietly(lambda: _gamma(args[1], key, counter, dims, node.attr("T"), log1p=False))
    return [values], _random_kernels.stepped(state, size * _RESERVED)


@_random_kernels.register_kernel("RandomPoisson", "RandomPoissonV2")
def _random_poisson(node: Node, args: list[Any], state: Any) -> tuple[list[Any], Any]:
    """``tf.random.poisson``'s kernel: ``shape`` draws of each rate, from the kernel's generator."""
    dims, size = _stateful_shape(node, args[0], args[1])
    if not size:
        return [_empty(dims, node.attr("dtype"))], state
    key, counter = _random_kernels.state_words(state)
    values = _ops_random.quietly(lambda: _poisson(args[1], key, counter, dims, node.attr("dtype")))
    return [values], _random_kernels.stepped(state, size * _RESERVED)

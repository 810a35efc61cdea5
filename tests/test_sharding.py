"""TensorArrays whose buffers are sharded over 8 (virtual CPU) devices.

The checks run in one subprocess started with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``
so that this pytest process keeps its single device. Each check runs on two meshes: ``auto``
(``Mesh(devices, ("x",))``, GSPMD/Shardy propagation) and ``explicit`` (``jax.make_mesh``'s
default in jax 0.10: shardings are part of the types). A check verifies values against a NumPy
or plain-JAX reference *and* the output shardings.

By default each check runs on one of the two meshes, alternating; ``--long`` runs both. Run
``python -m tests.test_sharding`` (from the repository root) to see every result directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import budget
from tests.helpers.internals import buffer_of, error_of, flags_of

T, B, F = 6, 8, 4  # steps, batch (sharded over 8 devices), features
MODES = ("auto", "explicit")
CHECKS: dict[str, Callable[[str], None]] = {}


def check(fn: Callable[[str], None]) -> Callable[[str], None]:
    CHECKS[fn.__name__.removeprefix("check_")] = fn
    return fn


# -- helpers (run in the subprocess) --------------------------------------------------------
def _setup(mode: str):
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    assert len(jax.devices()) == 8, jax.devices()
    if mode == "auto":
        mesh = Mesh(np.array(jax.devices()), ("x",))
    else:
        mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    xs_np = (np.arange(T * B * F, dtype=np.float32).reshape(T, B, F) / 100.0) - 0.5
    xs = jax.device_put(xs_np, NamedSharding(mesh, P(None, "x")))
    return mesh, xs_np, xs


def _tree_shardings(mesh, ta, spec):
    """A sharding per leaf of ``ta``: ``spec`` for the buffer, replicated bookkeeping."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    data_ndim = buffer_of(ta).ndim
    return jax.tree.map(lambda x: NamedSharding(mesh, spec if x.ndim == data_ndim else P()), ta)


def _assert_sharded(mesh, x, spec) -> None:
    from jax.sharding import NamedSharding

    expected = NamedSharding(mesh, spec)
    assert x.sharding.is_equivalent_to(expected, x.ndim), f"{x.sharding} is not {expected}"


def _rnn_reference(xs, W):
    import jax
    import jax.numpy as jnp

    def step(h, x):
        h = jnp.tanh(h @ W + x)
        return h, h

    return jax.lax.scan(step, jnp.zeros(xs.shape[1:]), xs)[1]


def _rnn(ta, xs, W):
    """Writes h_t at t and reads h_{t-1} back: returns (array, reads)."""
    import jax
    import jax.numpy as jnp

    def step(carry, t):
        h, ta = carry
        h = jnp.tanh(h @ W + xs[t])
        ta = ta.write(t, h)
        return (h, ta), ta.read(jnp.maximum(t - 1, 0))

    (_, ta), reads = jax.lax.scan(step, (jnp.zeros(xs.shape[1:]), ta), jnp.arange(xs.shape[0]))
    return ta, reads


# -- checks ---------------------------------------------------------------------------------
@check
def check_device_put_pytree(mode: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, xs = _setup(mode)
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(B, F), tensor_array_name="h")
    ta = jax.device_put(ta, _tree_shardings(mesh, ta, P(None, "x")))
    _assert_sharded(mesh, buffer_of(ta), P(None, "x"))
    _assert_sharded(mesh, flags_of(ta), P())
    assert "sharded P(None, 'x'" in repr(ta), repr(ta)
    ta = ta.unstack(xs)  # eager ops keep the sharding
    _assert_sharded(mesh, buffer_of(ta), P(None, "x"))
    np.testing.assert_array_equal(ta.stack(), xs_np)
    _assert_sharded(mesh, ta.stack(), P(None, "x"))


@check
def check_scan_write_read_keeps_sharding(mode: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, xs = _setup(mode)
    W = jnp.eye(F) * 0.5
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(B, F))
    ta = jax.device_put(ta, _tree_shardings(mesh, ta, P(None, "x")))
    out, reads = jax.jit(_rnn)(ta, xs, W)
    ref = np.asarray(_rnn_reference(xs_np, W))
    _assert_sharded(mesh, buffer_of(out), P(None, "x"))
    _assert_sharded(mesh, reads, P(None, "x"))
    np.testing.assert_allclose(out.stack(), ref, rtol=1e-6)
    np.testing.assert_allclose(reads, ref[np.maximum(np.arange(T) - 1, 0)], rtol=1e-6)
    assert out.error is None
    stacked = jax.jit(lambda t: t.stack())(out)
    gathered = jax.jit(lambda t, i: t.gather(i))(out, jnp.array([4, 1, 1]))
    _assert_sharded(mesh, stacked, P(None, "x"))
    _assert_sharded(mesh, gathered, P(None, "x"))
    np.testing.assert_allclose(gathered, ref[[4, 1, 1]], rtol=1e-6)
    if mode == "auto":  # explicit mode cannot merge an unsharded and a sharded dim (as jnp.reshape)
        np.testing.assert_allclose(jax.jit(lambda t: t.concat())(out), ref.reshape(T * B, F), rtol=1e-6)


@check
def check_grad_keeps_sharding(mode: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, xs = _setup(mode)
    W = jnp.eye(F) * 0.5 + 0.1

    def loss(xs, W):
        ta = jta.TensorArray(jnp.float32, size=T, element_shape=(B, F))
        ta = jax.lax.with_sharding_constraint(ta, _tree_shardings(mesh, ta, P(None, "x"))) \
            if mode == "auto" else jax.sharding.reshard(ta, _tree_shardings(mesh, ta, P(None, "x")))
        ta, reads = _rnn(ta, xs, W)
        return jnp.sum(ta.stack() ** 2) + jnp.sum(reads)

    def loss_ref(xs, W):
        hs = _rnn_reference(xs, W)
        return jnp.sum(hs ** 2) + jnp.sum(hs[jnp.maximum(jnp.arange(T) - 1, 0)])

    gx, gW = jax.jit(jax.grad(loss, argnums=(0, 1)))(xs, W)
    rx, rW = jax.grad(loss_ref, argnums=(0, 1))(xs_np, np.asarray(W))
    _assert_sharded(mesh, gx, P(None, "x"))
    np.testing.assert_allclose(gx, rx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gW, rW, rtol=1e-5, atol=1e-6)


@check
def check_constraint_inside_jit(mode: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, xs = _setup(mode)

    @jax.jit
    def fill(xs):
        ta = jta.TensorArray(jnp.float32, size=T, element_shape=(B, F))
        shardings = _tree_shardings(mesh, ta, P(None, "x"))
        ta = jax.lax.with_sharding_constraint(ta, shardings) if mode == "auto" else \
            jax.sharding.reshard(ta, shardings)
        ta, _ = jax.lax.scan(lambda ta, t: (ta.write(t, 2.0 * xs[t]), None), ta, jnp.arange(T))
        return ta

    ta = fill(xs)
    _assert_sharded(mesh, buffer_of(ta), P(None, "x"))
    np.testing.assert_allclose(ta.stack(), 2 * xs_np)


@check
def check_shard_map_local_arrays(mode: str) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, xs = _setup(mode)

    def body(xs_local):  # [T, B/8, F] on each device
        inputs = jta.TensorArray(jnp.float32, size=T, element_shape=xs_local.shape[1:]).unstack(xs_local)
        out = jta.TensorArray(jnp.float32, size=T, element_shape=xs_local.shape[1:])
        # A fresh array is the same on every device; the scan writes device-varying values into
        # it, so the carry must be marked device-varying first (as for any shard_map scan carry).
        carry = jax.lax.pcast((jnp.zeros(xs_local.shape[1:]), out), ("x",), to="varying")

        def step(carry, t):
            h, out = carry
            h = h + inputs.read(t)
            return (h, out.write(t, h)), None

        (_, out), _ = jax.lax.scan(step, carry, jnp.arange(T))
        jta.throw(out)
        return out.stack()

    cumsum = jax.shard_map(body, mesh=mesh, in_specs=P(None, "x"), out_specs=P(None, "x"))
    out = jax.jit(cumsum)(xs)
    _assert_sharded(mesh, out, P(None, "x"))
    np.testing.assert_allclose(out, np.cumsum(xs_np, 0), rtol=1e-5, atol=1e-6)
    g = jax.jit(jax.grad(lambda x: jnp.sum(cumsum(x) ** 2)))(xs)
    ref = jax.grad(lambda x: jnp.sum(jnp.cumsum(x, 0) ** 2))(xs_np)
    _assert_sharded(mesh, g, P(None, "x"))
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-5)


@check
def check_shard_map_called_eagerly_raises_each_error_as_eager_code_does(mode: str) -> None:
    """JAX runs an eager shard_map op by op, each op compiled alone: a check raises there at once,
    TF's class and text (a read out of range; a dropped array's double write), with or without
    disable_jit, on the shard that fails (here the last)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, _, xs = _setup(mode)

    def body(xs_local, i):
        shard = jax.lax.axis_index("x")
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=())
        if i == 0:  # a double write on the last shard only, the array dropped
            ta.write(shard // 7, 1.0).write(0, 2.0)
            return xs_local
        return xs_local + ta.write(0, 1.0).read(jnp.where(shard == 7, i, 0))

    for disable in (False, True):
        with jax.disable_jit(disable):
            for i, text in ((0, "Could not write to TensorArray index 0 because it has already been written to"),
                            (5, "Tried to read from index 5 but array size is: 3")):
                run = jax.shard_map(lambda x, i=i: body(x, i), mesh=mesh, in_specs=P(None, "x"),
                                    out_specs=P(None, "x"))
                try:
                    run(xs)
                except jta.errors.InvalidArgumentError as e:
                    assert text in str(e), (disable, str(e))
                else:
                    raise AssertionError(f"no error (disable_jit={disable}, i={i})")


@check
def check_shard_map_batched_arrays(mode: str) -> None:
    """A vmapped (batched) TensorArray sharded along its batch dim, passed into shard_map."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import jta

    mesh, xs_np, _ = _setup(mode)
    batch = jax.vmap(lambda _: jta.TensorArray(jnp.float32, size=T, element_shape=(F,)))(jnp.arange(B))
    batch = jax.device_put(batch, NamedSharding(mesh, P("x")))  # every leaf along its batch dim
    xb_np = np.transpose(xs_np, (1, 0, 2))  # [B, T, F]
    xb = jax.device_put(xb_np, NamedSharding(mesh, P("x")))

    def fill_one(ta, x):
        ta, _ = jax.lax.scan(lambda ta, t: (ta.write(t, jnp.sin(x[t])), None), ta, jnp.arange(T))
        return ta

    body = jax.shard_map(jax.vmap(fill_one), mesh=mesh, in_specs=(P("x"), P("x")), out_specs=P("x"))
    out = jax.jit(body)(batch, xb)
    for leaf in (buffer_of(out), flags_of(out), error_of(out)):
        _assert_sharded(mesh, leaf, P("x"))
    stack = jax.shard_map(jax.vmap(lambda ta: ta.stack()), mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    stacked = jax.jit(stack)(out)
    _assert_sharded(mesh, stacked, P("x"))
    np.testing.assert_allclose(stacked, np.sin(xb_np), rtol=1e-6)
    if mode == "auto":
        # Not with an Explicit batch axis: the runtime check of stack() is a jax.debug.callback,
        # and vmap of a callback slices its explicitly sharded batch dim, which JAX 0.10 refuses.
        stacked = jax.jit(jax.vmap(lambda ta: ta.stack()))(out)
        _assert_sharded(mesh, stacked, P("x"))
        np.testing.assert_allclose(stacked, np.sin(xb_np), rtol=1e-6)
    jta.throw(out)
    assert "batch=(8,)" in repr(out), repr(out)


@check
def check_tf_style_registry(mode: str) -> None:
    """jta.gradients accumulators of a sharded forward array stay sharded."""
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import jta
    from jta import gradients

    mesh, xs_np, xs = _setup(mode)
    ta = jta.TensorArray(np.float32, size=T, element_shape=(B, F), tensor_array_name="fwd").unstack(xs)
    ta = jax.device_put(ta, _tree_shardings(mesh, ta, P(None, "x")))

    @jax.jit
    def backward(ta, dv):
        reg: dict = {}
        reg = gradients.read_grad(reg, ta, 2, dv, source="gradients")
        reg = gradients.read_grad(reg, ta, 2, dv, source="gradients")  # aggregates
        reg = gradients.read_grad(reg, ta, 3, dv, source="gradients_1")  # another source: independent
        reg, d0 = gradients.unstack_grad(reg, ta, source="gradients")
        reg, d1 = gradients.unstack_grad(reg, ta, source="gradients_1")
        return reg, d0, d1

    reg, d0, d1 = backward(ta, xs[0])
    for x in (d0, d1, buffer_of(reg[("fwd", "gradients")])):
        _assert_sharded(mesh, x, P(None, "x"))
    expected0 = np.zeros_like(xs_np)
    expected0[2] = 2 * xs_np[0]
    expected1 = np.zeros_like(xs_np)
    expected1[3] = xs_np[0]
    np.testing.assert_allclose(d0, expected0)
    np.testing.assert_allclose(d1, expected1)


def _run_all(names: list[str]) -> dict[str, str]:
    results = {}
    for name in names:
        check_name, mode = name.removesuffix("]").split("[")
        try:
            CHECKS[check_name](mode)
            results[name] = "ok"
        except Exception:  # reported to the parent test
            results[name] = traceback.format_exc()
    return results


# Every check on both meshes under --long; by default each check on one, alternating.
NAMES = [f"{n}[{m}]" for k, n in enumerate(CHECKS) for m in (MODES if budget.LONG else MODES[k % len(MODES):][:1])]


# -- pytest side ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count=8 {os.environ.get('XLA_FLAGS', '')}",
               JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "tests.test_sharding", "--json", *NAMES], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.long
@pytest.mark.parametrize("name", NAMES)
def test_sharding(results: dict[str, str], name: str) -> None:
    assert results[name] == "ok", results[name]


if __name__ == "__main__":
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = _run_all(chosen or [f"{n}[{m}]" for n in CHECKS for m in MODES])
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")

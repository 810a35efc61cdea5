"""Every public op × every mode: each op's error reaches the user once, with the eager text.

The ops are enumerated from the public surface (``TensorArray``'s methods, ``jta.raw_ops``'s
``TensorArray*`` functions, ``jta.gradients``' ``*_grad`` functions), so a new op without a case
here fails :func:`test_every_public_op_has_a_case`. Each case fails at a traced index (or, where
an op takes none, at a static argument), and in every mode (eager, ``jta.checked``,
``jax.jit(jta.checkify(f))``, a bare ``jax.jit`` then ``jta.throw``, and ``jax.export`` of the
checkified function) the exception has the eager class and text. Structurally, a value op's
program holds exactly one run-time check (``jta_check`` with ``deferred=False``) and a mutator's
none: its error travels in the array or state it returns.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import gradients, raw_ops
from tests.helpers.internals import checks_in

f32 = jnp.float32
ROW = np.ones(2, np.float32)


def _empty():
    return jta.TensorArray(f32, size=3, element_shape=(2,), tensor_array_name="ta")


def _full():
    return _empty().unstack(np.ones((3, 2), np.float32))


def _raw(op):
    def run(i):
        s = raw_ops.new_state()
        s, h, flow = raw_ops.TensorArrayV3(s, 3, f32, element_shape=(2,), tensor_array_name="raw")
        s, flow = raw_ops.TensorArrayScatterV3(s, h, np.arange(3), np.ones((3, 2), np.float32), flow)
        return op(s, h, flow, i)
    return run


def _grad(op):
    return lambda i: op({}, _full(), i)


# name: (kind, fn of the failing index, failing index); kind "value" returns a value (checked at
# run time), "mutator" returns an array, state or registry (its error deferred), "static" fails
# while tracing whatever the mode.
CASES = {
    "TensorArray.write": ("mutator", lambda i: _empty().write(i, ROW), 7),
    "TensorArray.scatter": ("mutator", lambda i: _empty().scatter(jnp.stack([i, 0]), np.ones((2, 2), np.float32)), 7),
    "TensorArray.unstack": ("static", lambda i: _full().unstack(np.ones((3, 2), np.float32)), 0),
    "TensorArray.split": ("static", lambda i: _empty().split(np.ones((3, 2), np.float32), [1, 1]), 0),
    "TensorArray.close": ("static", lambda i: _full().close().read(0), 0),
    "TensorArray.read": ("value", lambda i: _full().read(i), 7),
    "TensorArray.gather": ("value", lambda i: _full().gather(jnp.stack([i, 0])), 7),
    "TensorArray.stack": ("value", lambda i: _empty().write(i, ROW).stack(), 7),
    "TensorArray.stack_padded": ("value", lambda i: _empty().write(i, ROW).stack_padded(), 7),
    "TensorArray.concat": ("value", lambda i: _empty().write(i, ROW).concat(), 7),
    "TensorArray.throw": ("value", lambda i: _empty().write(i, ROW).throw(), 7),
    "TensorArray.grad": ("mutator", lambda i: _full().grad("s", {})[1].write(i, ROW), 7),
    "TensorArrayV3": ("static", lambda i: raw_ops.TensorArrayV3(raw_ops.new_state(), -1, f32), 0),
    "TensorArrayWriteV3": ("mutator", _raw(lambda s, h, f, i: raw_ops.TensorArrayWriteV3(s, h, i, ROW, f)[0]), 7),
    "TensorArrayScatterV3": ("mutator", _raw(lambda s, h, f, i: raw_ops.TensorArrayScatterV3(
        s, h, jnp.stack([i]), np.ones((1, 2), np.float32), f)[0]), 7),
    "TensorArraySplitV3": ("static", _raw(lambda s, h, f, i: raw_ops.TensorArraySplitV3(
        s, h, np.ones((3, 2), np.float32), np.array([1, 1]), f)), 0),
    "TensorArrayReadV3": ("value", _raw(lambda s, h, f, i: raw_ops.TensorArrayReadV3(s, h, i, f, f32)[1]), 7),
    "TensorArrayGatherV3": ("value", _raw(lambda s, h, f, i: raw_ops.TensorArrayGatherV3(
        s, h, jnp.stack([i]), f, f32)[1]), 7),
    "TensorArrayConcatV3": ("value", _raw(lambda s, h, f, i: raw_ops.TensorArrayConcatV3(
        raw_ops.TensorArrayWriteV3(s, h, i, ROW, f)[0], h, f, f32)[1]), 7),
    "TensorArraySizeV3": ("static", _raw(lambda s, h, f, i: raw_ops.TensorArraySizeV3(s, "nothing", f)), 0),
    "TensorArrayCloseV3": ("static", _raw(lambda s, h, f, i: raw_ops.TensorArrayReadV3(
        raw_ops.TensorArrayCloseV3(s, h), h, 0, f, f32)), 0),
    "TensorArrayGradV3": ("static", _raw(lambda s, h, f, i: raw_ops.TensorArrayGradV3(s, "nothing", f, "s")), 0),
    "TensorArrayGradWithShape": ("static", _raw(lambda s, h, f, i: raw_ops.TensorArrayGradWithShape(
        s, "nothing", f, [2], "s")), 0),
    "read_grad": ("mutator", _grad(lambda r, t, i: gradients.read_grad(r, t, i, ROW, "s")), 7),
    "write_grad": ("value", _grad(lambda r, t, i: gradients.write_grad(r, t, i, "s")[1]), -1),
    "gather_grad": ("mutator", _grad(lambda r, t, i: gradients.gather_grad(r, t, jnp.stack([i]), np.ones((1, 2)), "s")), 7),
    "scatter_grad": ("value", _grad(lambda r, t, i: gradients.scatter_grad(r, t, jnp.stack([i]), "s")[1]), -1),
    "concat_grad": ("static", _grad(lambda r, t, i: gradients.concat_grad(r, t, np.array([1, 1]), np.ones((2, 2)), "s")), 0),
    "split_grad": ("static", _grad(lambda r, t, i: gradients.split_grad(r, t, "s")), 0),
    "stack_grad": ("static", _grad(lambda r, t, i: gradients.stack_grad(r, t, np.ones((4, 2)), "s")), 0),
    "unstack_grad": ("static", _grad(lambda r, t, i: gradients.unstack_grad(r, t.close(), "s")), 0),
}
# Ops that cannot fail, or only through another op listed above.
NO_ERRORS = {"TensorArray.size", "TensorArray.identity", "TensorArray.error", "TensorArray.dtype",
             "TensorArray.element_shape", "TensorArray.dynamic_size", "TensorArray.handle", "TensorArray.flow",
             "TensorArray.name"}


def _public_ops() -> set[str]:
    methods = {f"TensorArray.{n}" for n, v in vars(jta.TensorArray).items()
               if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    raw = {n for n, v in vars(raw_ops).items()
           if n.startswith("TensorArray") and inspect.isfunction(v) and v.__module__ == raw_ops.__name__}
    grads = {n for n in gradients.__all__ if n.endswith("_grad")} if hasattr(gradients, "__all__") else \
        {n for n, v in vars(gradients).items() if n.endswith("_grad") and inspect.isfunction(v)}
    return methods | raw | grads


def test_every_public_op_has_a_case():
    missing = _public_ops() - set(CASES) - NO_ERRORS
    assert not missing, f"public ops without a reporting case: {sorted(missing)}"


def _eager_error(fn, index) -> Exception:
    with pytest.raises((jta.errors.TensorArrayError, ValueError, TypeError)) as info:
        jta.throw(fn(index))
    return info.value


def _in_mode(mode: str, fn, index):
    if mode == "checked":
        return jta.checked(fn)(index)
    if mode == "checkify":
        error, out = jax.jit(jta.checkify(fn))(index)
        return error.throw(), out
    if mode == "export":
        leaves = jta.checkify(lambda i: jax.tree_util.tree_leaves(fn(i)))  # (registries' keys are tuples)
        exported = jax.export.export(jax.jit(leaves))(np.int32(index))
        error, out = jax.export.deserialize(exported.serialize()).call(np.int32(index))
        return error.throw(), out
    assert mode == "barejit", mode
    try:
        out = jax.block_until_ready(jax.jit(fn)(index))
    except jax.errors.JaxRuntimeError:
        jta.throw()
        raise
    return jta.throw(out)


@pytest.mark.rotate("mode")
@pytest.mark.parametrize("mode", ["checked", "export", "barejit"])  # checked: jax.jit(jta.checkify(f)), then throw
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_op_reports_its_error_once_in_every_mode(name, mode):
    kind, fn, index = CASES[name]
    expected = _eager_error(fn, index)
    if kind != "static":
        checks = checks_in(jax.make_jaxpr(fn)(index).jaxpr)
        if kind == "value":
            assert checks[False] == 1, (name, checks)
        else:
            assert checks[False] == 0, (name, checks)
    try:
        jta.throw()  # an earlier test's compiled error, never taken
    except jta.errors.TensorArrayError:
        pass
    with pytest.raises(type(expected)) as info:
        _in_mode(mode, fn, index)
    assert str(info.value) == str(expected), (name, mode)
    if kind != "static":
        assert jta.throw() is None, (name, mode)  # reported once: nothing left behind

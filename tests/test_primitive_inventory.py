"""Every JAX primitive that can hold a program: a rule of ``jta.checkify``'s interpreter, or a
stated reason why no check can be lost in it.

The primitives are found by walking ``jax._src`` and ``jax.experimental`` (every module that
imports here) for ``core.Primitive`` objects, and picking those that look higher-order: JAX
gives them a dead-code or a partial-evaluation rule of their own, or their name says they call,
map, loop or branch. Each must be classified below, so a JAX upgrade that adds one fails here
until someone says what happens to a check inside it. What a check inside each kind does is
tested by behaviour in ``test_channel_structure.py`` (``HIGHER_ORDER``: 14 constructs in every
mode; ``test_a_primitive_without_a_rule_is_refused_at_trace_time``: the generic refusal).
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import jax
import jax._src
import jax.experimental
import pytest
from jax._src import core
from jax._src.interpreters import partial_eval as pe

from tests.helpers.internals import functionalize_rules

# Threaded by a rule of jta.checkify's interpreter (jta._delivery.functionalize.RULES).
THREADED = {"call", "closed_call", "composite", "cond", "custom_jvp_call", "custom_vjp_call", "jit", "remat2",
            "scan", "shard_map", "while"}
# Hold a jaxpr, have no rule: a check inside is refused at trace time (UNSUPPORTED_PRIMITIVE),
# never skipped. Why no rule: their semantics would need one written against each (a batching
# rule of the user's, a solver's transpose, a linear function's transpose, mutable state, a
# kernel language), and no TensorArray program has asked for them.
REFUSED = {"custom_vmap_call", "custom_linear_solve", "linear_call", "custom_lin", "remat_opt", "run_state",
           "run_scoped", "core_map", "parallel_loop", "pallas_call", "fused_call", "custom_fusion", "jaxpr_call",
           "call_hi_primitive", "call_hi_primitive_linearized", "mpmd_map", "custom_partitioning",
           "xla_metadata_call", "custom_jvp_call_jaxpr", "compute_on"}
# Hold no program that jta's ops can reach: host callbacks (a Python function run eagerly on the
# host, where a jta op raises as in eager code), foreign calls, an exported module (its checks
# were threaded or refused when it was exported), sharding and synchronization annotations.
NO_PROGRAM = {"buffer_callback", "debug_callback", "io_callback", "pure_callback", "ffi_call", "tpu_custom_call",
              "call_exported", "call_tf", "inspect_sharding", "sharding_constraint", "reshard", "shard_alike",
              "platform_index", "rng_uniform", "get_barrier_semaphore", "semaphore_read", "semaphore_signal",
              "semaphore_signal_multicast", "semaphore_signal_parallel", "semaphore_wait", "free_ref", "new_ref",
              "get", "swap", "addupdate", "debug_print"}
LOOKS_HIGHER_ORDER = re.compile(r"call|map|loop|while|scan|cond|remat|composite|custom|checkpoint|jit|shard|switch"
                                r"|run_|fori|core_|compute_on")


def _primitives() -> dict[str, core.Primitive]:
    found: dict[str, core.Primitive] = {}
    for package in (jax._src, jax.experimental):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if "jax2tf" in info.name:  # imports TensorFlow; its call_tf is classified by name
                continue
            try:
                module = importlib.import_module(info.name)
            except Exception:  # a backend or an optional dependency this machine lacks
                continue
            for value in list(vars(module).values()):
                if isinstance(value, core.Primitive):
                    found.setdefault(value.name, value)
    return found


@pytest.fixture(scope="module")
def primitives() -> dict[str, core.Primitive]:
    return _primitives()


def test_every_higher_order_primitive_is_threaded_or_refused(primitives):
    own_rules = {p.name for p in (*pe.dce_rules, *pe.partial_eval_jaxpr_custom_rules) if hasattr(p, "name")}
    candidates = {name for name in primitives if LOOKS_HIGHER_ORDER.search(name)} | (own_rules & set(primitives))
    candidates -= {"jta_check"}  # jta's own report (it has a partial-evaluation rule), the thing threaded
    unclassified = sorted(candidates - THREADED - REFUSED - NO_PROGRAM)
    assert not unclassified, f"say what a check inside these does (THREADED, REFUSED or NO_PROGRAM): {unclassified}"


def test_the_threaded_ones_have_their_rule(primitives):
    rules = functionalize_rules()
    assert THREADED == {p.name for p in rules} - {"jta_check"}
    assert THREADED <= set(primitives)


def test_the_classes_do_not_overlap():
    assert not (THREADED & REFUSED) and not (THREADED & NO_PROGRAM) and not (REFUSED & NO_PROGRAM)

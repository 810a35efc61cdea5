"""Loops whose variables change shape from step to step, run as many steps as the data decides.

A ``tf.while_loop`` with ``shape_invariants`` (a cache grown by ``tf.concat``, a history of the
steps) has no ``lax`` loop: a ``lax`` loop's carry keeps one shape. Where the trip count is static
the loop is unrolled (:mod:`._tf2_loops`); where the data decides it, the shapes after the loop
depend on the data, so no single program computes them, but one program per trip count does, as
``jax.jit`` compiles one per shape. Under ``jta.checked`` the loop is therefore unrolled to a
trip count learned at run time (``jta._core.capacities``). Until a run told it, the trace stops at
the loop (:class:`~jta._core.capacities.CountNeeded`), and a program up to the loop's end (a
*probe*) unrolls :data:`FIRST_STEPS` steps and returns the count, or ``-s`` where the loop ran past
them (``s`` steps next, twice as many, up to :data:`MAX_STEPS`); then the whole function is traced
with the loop unrolled to the count. A later run of another count reports it (code 508), and
``jta.checked`` compiles for it and reruns, as for any size it learns. Where no probe reaches the
loop (inside a loop body, a branch, a nested ``jit``), the whole trace unrolls the steps instead.

Each step runs under ``lax.cond`` of the loop not having ended yet: a run whose count is smaller
than the steps unrolled must not run steps TensorFlow never runs (an inner loop of such a step could
run for ever, and a check of its could fail). The count is reported right after the loop, before
anything that follows it reports. What a step leaves static (a counter) stays static after it, as
in an unrolled loop of a static trip count: a tape's gradient loop then runs as many steps,
unrolled too (the trace of the whole function must not see a guessed count: reading the forward
loop's lists backwards from a guessed step fails while tracing).
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._core import capacities
from .._records.catalogue import Error
from ._functions import Body, Evaluator, concrete
from ._messages import GraphError
from ._nodes import Node

__all__ = ["ShapeChanges", "run_learned", "condition", "MAX_STEPS"]

MAX_STEPS = 64  # a loop of at most this many steps that cannot be a lax loop is unrolled
FIRST_STEPS = 8  # the steps unrolled before a run told the trip count


class ShapeChanges(Exception):
    """Raised while tracing a loop's body as a ``lax`` loop's: a loop variable's shape changes
    (:mod:`._tf2_loops` turns it into :func:`run_learned` or the refusal of :func:`refuse`)."""

    def __init__(self, old: tuple[int, ...], new: tuple[int, ...]):
        super().__init__(f"a loop variable changes shape from {old} to {new}")
        self.old, self.new = old, new


def refuse(node: Node, changed: ShapeChanges, why: str = "") -> NoReturn:
    """Code 436: the loop cannot be run (``why``: what stops it here)."""
    GraphError.TF2_LOOP.raise_(node=node.name, op=node.op, what=(
        f"a loop variable changes shape from {changed.old} to {changed.new} (shape_invariants, as a cache grown "
        f"by tf.concat); a lax loop needs fixed shapes{why}. The ways out: a static trip count of at most "
        f"{MAX_STEPS} steps (the loop is then unrolled), a call through jta.checked (which learns a trip count of "
        f"at most {MAX_STEPS} steps the data decides, and compiles for each), an eager call (concrete arguments: "
        "the loop runs step by step), or a tf.TensorArray written at the step in place of the growing tensor."))


def run_learned(ev: Evaluator, node: Node, cond: Body, body: Body, args: list[Any], bound: Optional[int],
                changed: ShapeChanges) -> list[Any]:
    """The loop's outputs, its steps unrolled to the trip count ``jta.checked`` learned (``bound``: the most
    steps it can run, if known); refused outside ``jta.checked``."""
    learned = capacities.learned_count(("steps of a loop whose variables change shape", node.name))
    if learned is None:
        refuse(node, changed, " (outside jta.checked, no trip count the data decides is known)")
    number, count = learned
    unknown = count is None or count < 0  # (negative: a run went past that many steps)
    if unknown and not capacities.probing() and capacities.learned_size(number, "unprobed") is None:
        raise capacities.CountNeeded(number)  # (jta.checked probes it: a program up to the end of the loop)
    steps = FIRST_STEPS if count is None else abs(count)
    if bound is not None:
        steps = min(steps, bound)
    if steps > MAX_STEPS:
        refuse(node, changed, f" (a run went past {MAX_STEPS} steps)")
    guess = -steps if count is None else count  # the count compiled for (negative: none; every run reports)
    state: list[Any] = args
    running: Any = True  # the loop has not ended yet (traced where the data decides)
    ran: Any = 0  # the steps run
    past: Any = False  # the loop runs past the steps unrolled
    for step in range(steps + 1):
        with capacities.at_site(step):  # (each step asks for its own sizes: jta.checked learns each)
            going = condition(ev, cond, state)
            if going is False:
                break  # the loop ends here whatever the data (a bound in the condition)
            if step == steps:
                past = bound is None or steps < bound  # (at the bound, TensorFlow stops too)
                past = past and jnp.logical_and(running, going)
                break
            running = running if going is True else jnp.logical_and(running, going)
            ran = ran + jnp.asarray(running, jnp.int32)
            state = _step(ev, body, state, running)
    # One report, after the loop: the steps past its end did not run (their checks recorded nothing), and
    # what follows the loop reports after it
    next_steps = min(max(2 * steps, FIRST_STEPS), MAX_STEPS + 1)
    reported = jnp.where(past, -next_steps, ran)
    if not unknown or not capacities.probed_size(number, reported):
        capacities.learned_rows(reported, node.name, number, stack=False, first=guess,
                                message=Error.LOOP_STEPS_LEARNED)
    return state


def condition(ev: Evaluator, cond: Body, state: list[Any]) -> Any:
    """A loop's condition on ``state``: ``True``, ``False`` or a traced bool."""
    c = concrete(ev.call(cond, state)[0])
    return bool(np.asarray(c)) if not isinstance(c, Tracer) else jnp.asarray(c).astype(bool).reshape(())


def _step(ev: Evaluator, body: Body, state: list[Any], running: Any) -> list[Any]:
    """One step of the body on ``state`` where ``running`` (else zeros of its results' shapes), with what
    the step computes statically (from static values of ``state``) static, as the step itself gives it."""
    if not isinstance(running, Tracer):
        return [concrete(v) for v in ev.call(body, state)]
    ran: list[Any] = []  # the step's results, as leaves, and their tree

    def step() -> list[Any]:
        leaves, tree = jax.tree_util.tree_flatten([concrete(v) for v in ev.call(body, state)])  # (state closed
        ran[:] = [leaves, tree]  # over: its static values stay static)
        return [v for v in leaves if isinstance(v, Tracer)]

    def skip() -> list[Any]:
        traced = step() if not ran else [v for v in ran[0] if isinstance(v, Tracer)]  # (lax.cond traces the
        return [jnp.zeros_like(v) for v in traced]  # branch taken first, today)

    out = iter(jax.lax.cond(running, step, skip))
    leaves, tree = ran
    return jax.tree_util.tree_unflatten(tree, [next(out) if isinstance(v, Tracer) else v for v in leaves])

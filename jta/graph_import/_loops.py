"""While frames of an imported graph as ``lax.scan``, masked ``lax.scan``, ``lax.while_loop`` or unrolled code.

:class:`Loops` is the half of the graph runner (:class:`jta.graph_import._control_flow.Runner`) that runs
a frame (:class:`jta.graph_import._frames.Frame`): it finds the trip count by partial evaluation, learns
what the body creates, and builds the loop; the runner's :meth:`~Loops.run` runs each scope.

**Trip counts.** Before a loop runs, the variables whose initial values are static (numpy) are
iterated in Python through the cond and the part of the body they depend on (partial
evaluation): when the cond stays static, the trip count is known, the loop becomes ``lax.scan``
(reverse-differentiable) with the static variables' values fed per step, and their final values
stay static after the loop (so a gradient loop counting down from a forward loop's count is
static too). When the cond is a ``LogicalAnd`` with a static operand (``maximum_iterations=``)
and a run-time one, the static operand bounds the count: the loop becomes a ``lax.scan`` over the
bound whose step is a ``lax.cond`` on the loop condition (still reverse-differentiable).
Otherwise it becomes ``lax.while_loop``.

**Discovery.** A loop body may create arrays, gradient accumulators (``TensorArrayGradV3`` inside
a gradient loop) or push onto stacks: the body is traced once with ``jax.eval_shape`` to learn
them (tf2xla's trick), they are created before the loop, stacks get a ``[capacity, ...]``
buffer (capacity: trip count × pushes per step, or ``stack_capacity=``), and the body is traced
again to check that the carry keeps its structure. When it does not (ragged elements, arrays
that grow without a capacity), a loop with a static trip count is unrolled instead.

**Eager calls.** Concrete integer scalars are static (:func:`jta.graph_import._resources.known`), so
a trip count fed to an eager call is known as it is to TensorFlow. A loop that cannot be a ``lax``
loop (its carry changes structure: a ``dynamic_size`` array grows, a variable changes shape, writes
are ragged) runs step by step in Python when every input is concrete; under ``jit`` it is refused
naming the loop, the array and the ways out (``tensor_array_capacity=``, or calling outside ``jit``).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import itertools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import errors, loops
from .._core import capacities
from . import _resources
from ._carry import (  # noqa: F401
    DEAD,
    Dyn,
    as_array,
    aval,
    concrete,
    dense_like,
    like,
    same_value,
    select,
    shape_of,
    structure,
    unwritten,
)
from ._frames import Frame, Graph
from ._messages import GraphError
from ._nodes import Tensor
from ._ops import is_static
from ._resources import Context, Recorder, Resources, known


@dataclasses.dataclass
class Options:
    stack_capacity: Optional[int] = None
    max_unroll: int = 256
    max_trip: int = 1_000_000
    max_bound: int = 10_000  # the most steps of a loop whose count is only bounded (a masked lax.scan)


class Unstable(Exception):
    """A loop body changes the structure of its carry: the loop is unrolled instead. Internal: when it
    cannot be, the loop raises a catalogue error, and the imported function turns any that escapes
    into one naming the loop."""


class Loops(abc.ABC):
    """The loops of a graph runner: one instance per call of the imported function."""

    def __init__(self, graph: Graph, ctx: Context, options: Options):
        self.g, self.ctx, self.opt = graph, ctx, options
        self.whiles = 0  # lax.while_loops built so far (a scan whose body builds one is unrolled instead)
        self.unrolling = 0  # unrolled loops running now (a loop inside runs again, in line, in each step)
        self.sizes: dict[int, tuple[Any, str]] = {}  # id of a run-time TensorArray size -> (it, its array's node)
        # stacks sized by jta.checked's plan (jta._core.capacities): handle -> (loop number, rows)
        self.planned: dict[str, tuple[int, int]] = {}
        self.frame_rows: dict[str, tuple[int, int]] = {}  # while frame -> (rows, loop number) of its plan

    @abc.abstractmethod
    def run(self, frame: str, items: tuple[Any, ...], env: dict[Tensor, Any], res: Resources,
            probe: bool = False) -> Resources:
        """Runs ``items`` (a schedule of :class:`jta.graph_import._frames.Graph`) of ``frame`` in ``env``."""

    # -- loops --------------------------------------------------------------------------------
    def _body_env(self, f: Frame, outer: dict[Tensor, Any], values: dict[str, Any]) -> dict[Tensor, Any]:
        env = dict(self._consts(f, outer))
        for m, v in values.items():
            env[(m, 0)] = v
            if m in f.switch_of:
                env[(f.switch_of[m], 1)] = v
                env[(f.switch_of[m], 0)] = DEAD
        return env

    def _consts(self, f: Frame, outer: dict[Tensor, Any]) -> dict[Tensor, Any]:
        return {(e, 0): known(outer.get(self.g.nodes[e].inputs[0], DEAD)) for e in f.enters
                if self.g.nodes[e].attr("is_constant")}

    def _pred(self, f: Frame, env: dict[Tensor, Any], res: Resources, probe: bool) -> Any:
        assert f.loopcond is not None
        self.run(f.name, self.g.schedule(f.name, (f.loopcond,), probe), env, res, probe)
        return env[(f.loopcond, 0)]

    def _probe(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], res: Resources
               ) -> tuple[Optional[int], dict[str, list[Any]], dict[str, Any], bool]:
        """Partial evaluation of the static loop variables: (trip count or None, trajectories, finals,
        bounded). ``bounded``: the count is at most ``n`` but known at run time only (a run-time
        condition and'ed with a static one, as ``maximum_iterations=`` builds); the finals are then
        the static variables that no step changes."""
        static = {m for m, v in init.items() if is_static(v)}
        while True:
            cur = {m: init[m] for m in static}
            traj: dict[str, list[Any]] = {m: [] for m in static}
            roots = tuple(f.next_of[m] for m in sorted(static))
            n, restart, bounded = 0, False, False
            while n <= (self.opt.max_bound if bounded else self.opt.max_trip):
                vals = {m: cur[m] if m in static else Dyn(shape_of(init[m])) for m in init}
                env = self._body_env(f, outer, vals)
                pred = self._pred(f, env, res, probe=True)
                if not is_static(pred):
                    if not self._static_conjunct(f, env):
                        return None, traj, cur, False
                    bounded = True
                elif not bool(pred):
                    if bounded:
                        cur = {m: init[m] for m in static if all(same_value(v, init[m]) for v in (*traj[m], cur[m]))}
                    return n, traj, cur, bounded
                self.run(f.name, self.g.schedule(f.name, roots, True), env, res, probe=True)
                nxt = {m: env[(f.next_of[m], 0)] for m in static}
                lost = {m for m, v in nxt.items() if not is_static(v)}
                if lost:
                    static -= lost
                    restart = True
                    break
                if bounded and all(same_value(nxt[m], cur[m]) for m in static):
                    return None, traj, cur, False  # a fixed point: the static operand stays true
                for m in static:
                    traj[m].append(cur[m])
                cur, n = nxt, n + 1
            if not restart:
                return None, traj, cur, False

    def _static_conjunct(self, f: Frame, env: dict[Tensor, Any]) -> bool:
        """Whether the loop condition is a ``LogicalAnd`` with a static (true) operand: it may bound the count."""
        assert f.loopcond is not None
        todo = [self.g.nodes[f.loopcond].inputs[0]]
        while todo:
            t = todo.pop()
            node = self.g.nodes.get(t[0])
            if node is None or node.op not in ("LogicalAnd", "Identity"):
                continue
            if node.op == "LogicalAnd" and any(is_static(env.get(i)) for i in node.inputs):
                return True
            todo.extend(node.inputs)
        return False

    def loop(self, name: str, outer: dict[Tensor, Any], res: Resources, probe: bool) -> Resources:
        f = self.g.frames[name]
        init = {m: known(outer.get(self.g.nodes[f.var_enter[m]].inputs[0], DEAD)) for m in f.merges}
        if any(v is DEAD for v in init.values()):  # in a cond branch pruned on a static predicate
            for e in f.exit_var:
                outer[(e, 0)] = DEAD
            return res
        n, traj, finals, bounded = self._probe(f, outer, init, res)
        if probe:
            for e, m in f.exit_var.items():
                env_v = finals[m] if (n is not None and m in finals) else Dyn(shape_of(init[m]))
                outer[(e, 0)] = env_v
            return res
        taken = self._taken(f, outer)
        try:
            res, final = self._lax(f, outer, init, n, traj, finals, bounded, res, taken)
        except (Unstable, errors.TensorArrayError, ValueError):
            # Not in a branch of a run-time cond: both branches run there and their Merge needs the loop's
            # results in the same structure as the other branch's, which a loop run step by step may not keep.
            # Nor a loop of TensorFlow's gradient graph (it pops the forward loop's values), nor one whose step
            # runs a loop or creates arrays: their gradients' accumulators are renewed per forward array in a
            # lax loop's step, which running the step in line does not reproduce.
            if taken is not None or f.pops or not self._flat(f) or not concrete(init, self._consts(f, outer), res):
                raise
            # Every input is concrete (an eager call): the loop runs step by step, as TensorFlow runs it,
            # whatever its carry does (a dynamic_size array grows, a variable changes shape, an element
            # shape is set by a write).
            res, final = self._stepwise(f, outer, init, res)
        for e, m in f.exit_var.items():
            outer[(e, 0)] = final[m]
        return res

    def _lax(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: Optional[int],
             traj: dict[str, list[Any]], finals: dict[str, Any], bounded: bool, res: Resources, taken: Any
             ) -> tuple[Resources, dict[str, Any]]:
        """The loop as a ``lax.scan`` (static or bounded trip count), ``lax.while_loop``, or unrolled."""
        name = f.name
        if n == 0:
            return res, dict(init)
        if bounded or n is None:  # (never unrolled: a size learned in its body is learned as usual)
            with capacities.learning_refused(False):
                return self._lax_dynamic(f, outer, init, n, traj, res, taken)
        try:
            # (a size jta.checked learns inside, which may differ between steps: unrolled, each step
            # learning its own, as for a body that cannot be a scan's)
            with capacities.learning_refused(n <= self.opt.max_unroll):
                return self._scan(f, outer, init, n, traj, finals, res, taken)
        except Unstable as why:
            if n > self.opt.max_unroll:
                GraphError.LOOP_STRUCTURE.raise_(frame=name, what=f"cannot be a lax.scan ({why}) and its "
                                                  f"{n} steps are more than max_unroll={self.opt.max_unroll}; "
                                                  f"pass max_unroll={n} or more, or call the imported function "
                                                  f"outside jax.jit (it then runs the loop step by step)")
            before = res
            res, final = self._unroll(f, outer, init, n, traj, finals, res)
            if taken is not None:
                res = self._where_taken(f, taken, res, before, "an unrolled loop (it cannot be a lax.scan)")
        return res, final

    def _lax_dynamic(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: Optional[int],
                     traj: dict[str, list[Any]], res: Resources, taken: Any) -> tuple[Resources, dict[str, Any]]:
        """A loop whose trip count is known at run time only (at most ``n``, if not ``None``)."""
        if n is not None and self._pushes(f):
            # The forward loop of TensorFlow's own gradient graph (it pushes its activations onto the
            # gradient's stacks, whose buffers the bound sizes): a lax.while_loop, whose step is not a
            # lax.cond carrying every buffer. Its gradient is the graph's; JAX's reverse mode of it is not
            # needed (a forward-only graph, with no stacks, stays a masked lax.scan).
            try:
                res, final = self._while(f, outer, init, traj, res, taken, bound=n)
            except Unstable:
                try:
                    res, final = self._masked_scan(f, outer, init, n, traj, res, taken)
                except Unstable:  # the unbounded lax.while_loop refuses, naming what changes and the way out
                    res, final = self._while(f, outer, init, traj, res, taken)
        elif n is not None:
            try:
                res, final = self._masked_scan(f, outer, init, n, traj, res, taken)
            except Unstable:
                res, final = self._while(f, outer, init, traj, res, taken)
        else:
            res, final = self._while(f, outer, init, traj, res, taken)
        return res, final

    def _flat(self, f: Frame) -> bool:
        """Whether a step of ``f`` runs no loop and creates no TensorArray or accumulator."""
        items = self.g.schedule(f.name, tuple(f.next_of[m] for m in f.merges), False)
        return not any(isinstance(i, tuple) or self.g.nodes[i].op in _CREATES for i in items)

    def _stepwise(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], res: Resources
                  ) -> tuple[Resources, dict[str, Any]]:
        """The loop run in Python on concrete values: the condition is read after each step, the body runs
        in line (no carry to keep, no trip count to know, no max_unroll: nothing is traced)."""
        values = dict(init)
        self.unrolling += 1
        try:
            for step in itertools.count():
                with capacities.at_site(step):  # (each step asks for its own sizes)
                    if not bool(self._pred(f, self._body_env(f, outer, values), res, probe=False)):
                        break
                    res, values = self.body(f, outer, res, values, traced=False)
                values = {m: known(v) for m, v in values.items()}
        finally:
            self.unrolling -= 1
        return res, values

    def _taken(self, f: Frame, outer: dict[Tensor, Any]) -> Any:
        """Whether the cond branches around the frame ``f`` are taken (a traced bool), or None when the
        frame is under no run-time condition. Both branches of such a cond run, so a loop in the branch
        not taken must do nothing: its bound may be garbage there (and never reached)."""
        conds = [(outer[p], polarity) for p, polarity in sorted(self.g.frame_guards.get(f.name, ()))
                 if p in outer and outer[p] is not DEAD and not is_static(known(outer[p])) and not isinstance(outer[p], Dyn)]
        if not conds:
            return None
        taken = [jnp.asarray(p, bool) if polarity else jnp.logical_not(p) for p, polarity in conds]
        return functools.reduce(jnp.logical_and, taken)

    def _where_taken(self, f: Frame, taken: Any, after: Resources, before: Resources, kind: str) -> Resources:
        """The resources after the loop where its branch is taken, those before it elsewhere."""
        guard = frozenset((p, polarity) for p, polarity in self.g.frame_guards.get(f.name, ()))
        selected, change = select(taken, after, before, self.made_under(after, guard))
        if selected is None:
            GraphError.GUARDED_LOOP.raise_(frame=f.name, kind=kind, what=change)
        return selected

    def body(self, f: Frame, outer: dict[Tensor, Any], res: Resources, values: dict[str, Any],
             traced: bool = True) -> tuple[Resources, dict[str, Any]]:
        """One step of the loop ``f``: traced inside a ``lax`` loop, or run in line (``traced=False``)."""
        self.ctx.depth += traced
        try:
            return self._step(f, outer, res, values)
        finally:
            self.ctx.depth -= traced

    def _step(self, f: Frame, outer: dict[Tensor, Any], res: Resources, values: dict[str, Any]
              ) -> tuple[Resources, dict[str, Any]]:
        env = self._body_env(f, outer, values)
        for p in f.pops:  # a handle popped in this loop names a new forward array each step
            h = env.get(self._before_switches(self.g.nodes[p].inputs[0]))
            if isinstance(h, str) and h in res.stacks and isinstance(res.stacks[h].const, str):
                res = _resources.renew_accumulators(res, res.stacks[h].const)
        roots = tuple(f.next_of[m] for m in f.merges)
        res = self.run(f.name, self.g.schedule(f.name, roots, False), env, res)
        return res, {m: env[(f.next_of[m], 0)] for m in f.merges}

    def _before_switches(self, t: Tensor) -> Tensor:
        """The tensor that ``t`` forwards through ``Switch`` and ``Identity`` nodes: the stack handle of a pop
        in a gradient loop under a cond (TensorFlow guards the pop with a ``Switch`` of the handle's ``Enter``),
        known when a step starts, before the body has computed the ``Switch``."""
        node = self.g.nodes.get(t[0])
        while node is not None and node.op in ("Switch", "RefSwitch", "Identity", "RefIdentity") and node.inputs:
            t = node.inputs[0]
            node = self.g.nodes.get(t[0])
        return t

    def _unroll(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
                traj: dict[str, list[Any]], finals: dict[str, Any], res: Resources
                ) -> tuple[Resources, dict[str, Any]]:
        values = dict(init)
        self.unrolling += 1
        try:
            for k in range(n):
                values.update({m: t[k] for m, t in traj.items()})
                with capacities.at_site(k):  # (each step asks for its own sizes: jta.checked learns each)
                    res, values = self.body(f, outer, res, values, traced=False)
        finally:
            self.unrolling -= 1
        values.update(finals)
        return res, values

    def _split_vars(self, f: Frame, init: dict[str, Any], traj: dict[str, list[Any]]
                    ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """Static loop variables constant over every step, those fed per step (stacked), the carried ones."""
        consts, xs = {}, {}
        for m, t in traj.items():
            if all(np.array_equal(v, t[0]) and np.asarray(v).dtype == np.asarray(t[0]).dtype for v in t):
                consts[m] = t[0]
            else:
                xs[m] = np.stack([np.asarray(v) for v in t])
        carried = [m for m in f.merges if m not in traj]
        return consts, xs, carried

    def _prepare(self, f: Frame, step: Any, res: Resources, carry: dict[str, Any], x0: Any,
                 n: Optional[int]) -> Resources:
        """Discover what the body creates, create it before the loop, and check the structure."""
        given = res
        for attempt in range(2):
            rec = Recorder()
            outer_recs, self.ctx.recorders = self.ctx.recorders, [rec]
            try:
                out_res, out_carry = jax.eval_shape(step, res, carry, x0)
            except Exception as e:  # noqa: BLE001 - any failure of the scan body means "unroll it"
                if n is None:
                    self._refuse(f, res, e)
                raise Unstable(f"{type(e).__name__}: {str(e)[:200]}") from e
            finally:
                self.ctx.recorders = outer_recs
            same = jax.tree.structure(out_res) == jax.tree.structure(res) and all(
                aval(a) == aval(b) for a, b in zip(jax.tree.leaves((out_res, out_carry)),
                                                     jax.tree.leaves((res, carry)), strict=True))
            if same:
                return self._grow(f, res, rec, n, given)
            if attempt == 1:
                if n is None:  # a while loop has no fallback: say what changes and what to do
                    what, way_out = self._carry_change(res, carry, out_res, out_carry)
                    GraphError.LOOP_CARRY.raise_(frame=f.name, what=what, way_out=way_out)
                raise Unstable("the loop body changes the structure of its carry")
            res = self._create(f, res, out_res, rec, n)
        return res

    def _carry_change(self, res: Resources, carry: dict[str, Any], out_res: Resources, out_carry: dict[str, Any]
                      ) -> tuple[str, str]:
        """What of the carry a step changes, and the way out, for :data:`GraphError.LOOP_CARRY`."""
        unroll = _STEPWISE + (f" A loop whose trip count is static is unrolled instead (up to max_unroll="
                              f"{self.opt.max_unroll} steps): feed what decides the trip count as a constant.")
        for handle, after in out_res.arrays.arrays.items():
            before = res.arrays.arrays.get(handle)
            if before is not None and structure(before) == structure(after):
                continue
            meta = jax.tree.structure(after).node_data()[1]
            node = self._array_node(handle)
            if before is not None and jax.tree.structure(before).node_data()[1].slots is not None:
                return (f"the element shape of TensorArray {node} is not fully defined, so each write changes "
                        f"its static structure", f"Give it a full element_shape where the graph creates it "
                        f"(tf.TensorArray(..., element_shape=...), or placeholders of static shape from which "
                        f"TensorFlow infers it). {unroll}")
            if meta.dynamic_size and meta.capacity is None:
                return (f"TensorArray {node} is dynamic_size without a static capacity, so a write past its end "
                        f"changes its static structure", f"Call the imported function through jta.checked (which learns its capacity at run time), or "
                        f"pass tensor_array_capacity=N to jta.import_graph_def. "
                        f"{unroll}")
            return f"TensorArray {node} changes its static structure", unroll
        for handle, stack in out_res.stacks.items():
            if structure(res.stacks.get(handle)) != structure(stack):
                return f"stack {handle} changes its static structure", f"Pass stack_capacity=N. {unroll}"
        for m, value in out_carry.items():
            if aval(value) != aval(carry[m]):
                return f"loop variable {m} changes from {aval(carry[m])} to {aval(value)}", unroll
        return "its resources change their static structure", unroll

    def _refuse(self, f: Frame, res: Resources, error: Exception) -> None:
        """Raises :data:`GraphError.LOOP_CARRY` for a body that failed while traced for a ``lax.while_loop``
        because a TensorArray it writes cannot keep a static structure (a ``dynamic_size`` array without a
        capacity, an element shape that is not known), naming the array and the way out; else ``error``."""
        if getattr(error, "plan_number", None) is not None:  # jta.checked gives it a buffer and traces again
            raise error
        named = getattr(error, "jta_array", None)  # the array's internal handle
        array = res.arrays.arrays.get(named) if named else None
        if array is None or not isinstance(error, (errors.TensorArrayError, ValueError)):
            raise error
        meta = jax.tree.structure(array).node_data()[1]
        node = self._array_node(named) if named else "?"
        if meta.dynamic_size and meta.capacity is None:
            what = (f"the array of TensorArrayV3 node {node} is dynamic_size and needs a static capacity: a "
                    f"write past its end would change its static structure")
            way_out = ("Call the imported function through jta.checked (which learns its capacity at run time), or "
                       "pass tensor_array_capacity=N to jta.import_graph_def (N: the most elements it holds). ")
        elif meta.slots is not None:
            what = (f"the element shape of the array of TensorArrayV3 node {node} is not fully defined, so a "
                    f"write at a traced index cannot place its value")
            way_out = ("Give it a full element_shape where the graph creates it (tf.TensorArray(..., "
                       "element_shape=...), infer_shape=True). ")
        else:
            raise error
        raise GraphError.LOOP_CARRY.exception(frame=f.name, what=what, way_out=way_out + _STEPWISE) from error

    def made_under(self, res: Resources, guard: frozenset[tuple[Tensor, bool]]) -> frozenset[str]:
        """The arrays of ``res`` whose ``TensorArrayV3`` node runs under every condition of ``guard``."""
        return frozenset(h for h in res.arrays.arrays
                         if guard <= self.g.guards.get((self._array_node(h), 0), frozenset()))

    @functools.cached_property
    def _array_nodes(self) -> dict[str, str]:
        """Each array handle (``<name>_<node number>``) -> its ``TensorArrayV3`` node."""
        return {f"{self.g.nodes[name].attr('tensor_array_name', '') or name}_{number}": name
                for name, number in self.ctx.array_ids.items() if name in self.g.nodes}

    def _array_node(self, handle: str) -> str:
        """The ``TensorArrayV3`` node whose array has the handle ``handle``, else the handle's repr."""
        return self._array_nodes.get(handle, repr(handle))

    def _grow(self, f: Frame, res: Resources, rec: Recorder, n: Optional[int], given: Resources) -> Resources:
        """``res`` with room for this loop's pushes onto stacks that were buffers before it (``given``: the
        loop runs in line again, in an unrolled outer loop's next step). Inside a traced loop body the enclosing loop sized
        them for every run of this one (its recorder counts them), and the carry must keep its shape."""
        if self.ctx.depth:
            return res
        stacks = dict(res.stacks)
        for h, pushed in rec.pushes.items():
            s = stacks[h]
            if s.data is None or h not in given.stacks or given.stacks[h].data is None:
                continue
            per_step = None if any(m is None for _, m in pushed) else sum(int(m or 0) for _, m in pushed)
            if n is not None and per_step is not None:
                extra = n * per_step
            elif self.opt.stack_capacity is not None:
                extra = self.opt.stack_capacity
            else:
                extra = self._planned(h, f, s.data.shape[0])
            room = jnp.zeros((extra, *s.data.shape[1:]), s.data.dtype)
            stacks[h] = _resources.Stack((), jnp.concatenate([s.data, room]), s.top)
        return Resources(res.arrays, stacks)

    def _planned(self, handle: str, f: Frame, before: int) -> int:
        """Rows for the pushes of a loop with no static trip count onto stack ``handle`` (which holds
        ``before`` rows already): ``jta.checked``'s plan, which grows when the loop reports it ran out
        (:meth:`_report_full`); outside it, the refusal naming ``stack_capacity=`` and ``jta.checked``."""
        if f.name not in self.frame_rows:  # one number per loop: all its stacks grow together
            planned = capacities.planned_rows()
            if planned is None:
                GraphError.STACK_CAPACITY.raise_(stack=handle, frame=f.name)
            self.frame_rows[f.name] = planned
        rows, loop = self.frame_rows[f.name]
        self.planned[handle] = (loop, before + rows)
        return rows

    def _report_full(self, res: Resources, handles: set[str]) -> None:
        """After a loop: each stack it planned that got more pushes than rows reports it (jta.checked reruns)."""
        for h in sorted(handles):
            loop, rows = self.planned[h]
            s = res.stacks.get(h)
            if s is not None and s.data is not None:
                capacities.report_full(loop, s.top, rows, f"stack {h}")

    def _create(self, f: Frame, res: Resources, out: Resources, rec: Recorder, n: Optional[int]) -> Resources:
        state = res.arrays
        arrays = dict(state.arrays)
        for h, ta in out.arrays.arrays.items():
            if h not in arrays:
                arrays[h] = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), ta)
            elif unwritten(arrays[h]) and ta.is_dense:
                arrays[h] = dense_like(arrays[h], ta)
        state = dataclasses.replace(state, arrays=arrays)
        res = Resources(state, res.stacks)
        for h, src, prepend in rec.grads:
            if (h, src) not in res.arrays.grads:
                res = _resources.precreate_grad(self.ctx, res, h, src, prepend)
        stacks = dict(res.stacks)
        for h, pushed in rec.pushes.items():
            s = stacks[h]
            if s.const is not None or s.data is not None:
                continue
            values = [v for v, _ in pushed]
            # A stack of one static value stays static (a handle, an inner loop's count); not a number
            # pushed in each step of an unrolled loop: the next step's run of this loop may push another.
            if not s.items and all(isinstance(v, str) or is_static(v) and not self.unrolling for v in values) and \
                    len({_resources.const_key(v) for v in values}) == 1:
                stacks[h] = _resources.Stack(const=_resources.const_key(values[0]))
                continue
            mults = [mult for _, mult in pushed]
            per_step = None if None in mults else sum(int(m or 0) for m in mults)
            if n is not None and per_step is not None:
                capacity = len(s.items) + n * per_step
            elif self.opt.stack_capacity is not None:
                capacity = self.opt.stack_capacity
            else:
                capacity = len(s.items) + self._planned(h, f, len(s.items))
            stacks[h] = _resources.as_buffer(s, capacity, values[0])
        for h in rec.popped:
            s = stacks[h]
            if s.const is None and s.data is None and s.items:
                stacks[h] = _resources.as_buffer(s, len(s.items), s.items[0])
        return Resources(res.arrays, stacks)

    def _scan(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
              traj: dict[str, list[Any]], finals: dict[str, Any], res: Resources, taken: Any = None
              ) -> tuple[Resources, dict[str, Any]]:
        consts, xs, carried = self._split_vars(f, init, traj)
        carry0 = {m: as_array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: dict[str, Any]) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **x, **c})
            return r, {m: like(nxt[m], c[m], f, m) for m in carried}

        x0 = {m: v[0] for m, v in xs.items()}
        whiles = self.whiles
        try:
            res = self._prepare(f, step, res, carry0, x0, n)
        except errors.TensorArrayError as e:  # e.g. a nested loop's stacks that no static count sizes (406)
            if self.whiles > whiles and xs and n <= self.opt.max_unroll:  # else: the error's way out (stack_capacity=)
                raise Unstable("a nested loop's trip count depends on the step") from e
            raise
        if self.whiles > whiles and xs:  # an inner trip count depends on the step: unrolled, it may be static
            raise Unstable("a nested loop's trip count depends on the step")
        recs = self.ctx.recorders
        for r in recs:
            r.multiplier = None if r.multiplier is None else r.multiplier * n

        def scan(state: tuple[Resources, dict[str, Any]]) -> tuple[Resources, dict[str, Any]]:
            return jax.lax.scan(lambda c, x: (step(c[0], c[1], x), None), state, xs, length=n)[0]

        try:
            if taken is None:
                res, carry = scan((res, carry0))
            else:  # in a cond branch: no step (nor any of its checks) where the branch is not taken
                res, carry = jax.lax.cond(taken, scan, lambda state: state, (res, carry0))
        finally:
            for r in recs:
                r.multiplier = None if r.multiplier is None else r.multiplier // n
        return res, {**finals, **carry}

    def _masked_scan(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
                     traj: dict[str, list[Any]], res: Resources, taken: Any = None
                     ) -> tuple[Resources, dict[str, Any]]:
        """A loop whose count is known at run time only but is at most ``n``: a ``lax.scan`` of ``n``
        steps, each a ``lax.cond`` on the loop condition (still true), so reverse mode works. In a cond
        branch not ``taken``, no step is active."""
        consts = {m: v for m, v in self._split_vars(f, init, traj)[0].items() if same_value(v, init[m])}
        carried = [m for m in f.merges if m not in consts]
        carry0 = {m: as_array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: Any) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **c})
            return r, {m: like(nxt[m], c[m], f, m) for m in carried}

        def masked(state: tuple[Resources, dict[str, Any], Any], x: Any) -> tuple[Any, None]:
            r, c, active = state
            env = self._body_env(f, outer, {**consts, **c})
            go = jnp.logical_and(active, jnp.asarray(self._pred(f, env, r, probe=False)))
            r, c = jax.lax.cond(go, lambda s: step(s[0], s[1], None), lambda s: s, (r, c))
            return (r, c, go), None

        res = self._prepare(f, step, res, carry0, None, n)
        recs = self.ctx.recorders
        for r in recs:
            r.multiplier = None if r.multiplier is None else r.multiplier * n
        try:
            (res, carry, _), _ = jax.lax.scan(masked, (res, carry0, jnp.asarray(True if taken is None else taken)),
                                             None, length=n)
        finally:
            for r in recs:
                r.multiplier = None if r.multiplier is None else r.multiplier // n
        return res, {**consts, **carry}

    def _pushes(self, f: Frame) -> bool:
        """Whether a step of ``f`` pushes onto a stack (and runs no loop inside)."""
        roots = tuple(f.next_of[m] for m in f.merges)
        items = self.g.schedule(f.name, roots, False)
        return not any(isinstance(i, tuple) for i in items) and any(
            self.g.nodes[i].op in ("StackPushV2", "StackPush") for i in items)

    def _while(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], traj: dict[str, list[Any]],
               res: Resources, taken: Any = None, bound: Optional[int] = None) -> tuple[Resources, dict[str, Any]]:
        """A ``lax.while_loop`` on the loop condition (and'ed with ``taken``: no step in a cond branch
        not taken, whose bound may never be reached)."""
        consts = self._invariants(f, outer, init, res)
        carried = [m for m in f.merges if m not in consts]
        carry0 = {m: as_array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: Any) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **c})
            return r, {m: like(nxt[m], c[m], f, m) for m in carried}

        def cond(state: tuple[Resources, dict[str, Any]]) -> Any:
            env = self._body_env(f, outer, {**consts, **state[1]})
            go = jnp.asarray(self._pred(f, env, state[0], probe=False))
            return go if taken is None else jnp.logical_and(taken, go)

        self.whiles += 1
        planned_before = set(self.planned)
        res = self._prepare(f, step, res, carry0, None, bound)  # bound: at most that many steps (sizes stacks)
        recs, saved = self.ctx.recorders, [r.multiplier for r in self.ctx.recorders]
        for r in recs:  # a bound caps the steps: an enclosing loop sizes its stacks by it (else: unknown)
            r.multiplier = None if r.multiplier is None or bound is None else r.multiplier * bound
        try:
            # jta's while_loop: a lax.while_loop that jax.grad of the imported function reverses (without
            # a bound, outside jta.checked, within the stacks' first rows)
            def stepped(s: Any) -> Any:
                return step(s[0], s[1], None)
            res, carry = loops.while_loop(cond, stepped, (res, carry0), maximum_iterations=bound) \
                if bound is not None else loops.unbounded_while_loop(cond, stepped, (res, carry0))
        finally:
            for r, m in zip(recs, saved, strict=True):
                r.multiplier = m
        self._report_full(res, set(self.planned) - planned_before)
        return res, {**consts, **carry}

    def _invariants(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], res: Resources
                    ) -> dict[str, Any]:
        """Static loop variables that every step passes through unchanged (they stay static)."""
        static = {m for m, v in init.items() if is_static(v)}
        while static:
            vals = {m: init[m] if m in static else Dyn(shape_of(init[m])) for m in init}
            env = self._body_env(f, outer, vals)
            roots = tuple(f.next_of[m] for m in sorted(static))
            self.run(f.name, self.g.schedule(f.name, roots, True), env, res, probe=True)
            keep = {m for m in static if is_static(env[(f.next_of[m], 0)])
                    and np.array_equal(env[(f.next_of[m], 0)], init[m])}
            if keep == static:
                break
            static = keep
        return {m: init[m] for m in static}


_CREATES = ("TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape")
_STEPWISE = ("Or call the imported function outside jax.jit, with concrete inputs: the loop then runs step by "
             "step, as in TensorFlow.")

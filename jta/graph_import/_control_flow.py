"""Control flow v1 of an imported graph: while frames to ``lax.scan``/``while_loop``, conds to selects.

The graph's frames, cond guards and schedules are found once, without values
(:mod:`jta.graph_import._frames`); a :class:`Runner` per call runs the schedules node by node, and each
while frame as one item (:mod:`jta.graph_import._loops`: trip counts, discovery, the ``lax`` loop). This
module holds the runner's nodes: ops, resource ops under conds, and the v1 conds themselves.

**Conds.** A ``Switch`` with a static predicate kills the other branch (TensorFlow's dead
tensors); with a run-time predicate both branches run, a ``Merge`` selects, and a stateful op
inside a branch updates the resources only where its branch conditions hold (a stack pushed or
popped there becomes a buffer with a traced top first, so its structure does not depend on the
branch; a TensorArray op whose checks may fail runs in a ``lax.cond``, so they fire only where
taken; arrays and stacks a branch creates are kept). A while loop inside such a branch runs only
where it is taken (:mod:`jta.graph_import._loops`).
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import errors
from . import _resources
from ._loops import DEAD, Dyn, Loops, select
from ._messages import GraphError
from ._nodes import Node, Tensor
from ._ops import is_static, run_op
from ._resources import Resources

# TensorArray ops whose checks may fail: under a run-time condition they run in a lax.cond.
CHECKED_OPS = ("TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
               "TensorArraySplitV3")
CONTROL_OPS = ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "Placeholder", "RefEnter",
               "RefExit", "RefMerge", "RefSwitch", "RefNextIteration")


class Runner(Loops):
    """Runs the graph: one instance per call of the imported function."""

    # -- one scope ----------------------------------------------------------------------------
    def run(self, frame: str, items: tuple[Any, ...], env: dict[Tensor, Any], res: Resources,
            probe: bool = False) -> Resources:
        for item in items:
            if isinstance(item, tuple):
                res = self.loop(item[1], env, res, probe)
            else:
                res = self.node(self.g.nodes[item], env, res, probe)
        return res

    def node(self, node: Node, env: dict[Tensor, Any], res: Resources, probe: bool) -> Resources:
        # Concrete integer and boolean scalars (an eager call's fed trip count, size or predicate) are
        # static, as they are to TensorFlow: shapes and trip counts computed from them are known, and a
        # cond on them prunes the branch not taken.
        args = [_resources.known(env.get(t, DEAD)) for t in node.inputs]
        name = node.name
        if node.op == "ControlTrigger":
            # Never dead, as in TensorFlow's executor: the forward count of a gradient loop waits on one
            # (f_sync) that collects the pushes of both branches of a cond in the loop, one of them dead.
            env[(name, 0)] = None
            return res
        dead = any(a is DEAD for a in args) or any(self._dead(c, env) for c in node.control)
        if node.op in ("Merge", "RefMerge"):
            env[(name, 0)], env[(name, 1)] = self._merge(node, args, env)
            return res
        if dead:
            for k in range(max(8, len(args))):
                env[(name, k)] = DEAD
            return res
        if probe and node.op in ("LogicalAnd", "LogicalOr") and not all(is_static(a) for a in args):
            absorbing = node.op == "LogicalOr"  # False and anything is False; True or anything is True
            if any(is_static(a) and np.shape(a) == () and bool(a) is absorbing for a in args):
                env[(name, 0)] = np.bool_(absorbing)
                return res
        if probe and any(isinstance(a, Dyn) for a in args) or probe and node.op in _resources.RESOURCE_OPS:
            if node.op in ("Shape", "Size", "Rank", "ShapeN") and all(
                    not isinstance(a, Dyn) or a.shape is not None for a in args):
                args = [np.zeros(a.shape, np.int8) if isinstance(a, Dyn) else a for a in args]
            else:
                for k in range(8):
                    env[(name, k)] = Dyn()
                return res
        if node.op in ("Switch", "RefSwitch"):
            data, pred = args
            if is_static(pred):
                env[(name, 0)], env[(name, 1)] = (DEAD, data) if bool(pred) else (data, DEAD)
            else:
                env[(name, 0)] = env[(name, 1)] = data
            return res
        if node.op in ("Identity", "NextIteration", "LoopCond", "RefIdentity", "RefNextIteration") or \
                node.op in ("Placeholder", "PlaceholderWithDefault") and args:
            env[(name, 0)] = args[0]
            return res
        if node.op in _resources.RESOURCE_OPS:
            return self._resource(node, args, env, res)
        if probe and node.op == "PrintV2":  # (a probe runs the ops of constants to count a loop's steps)
            return res
        try:
            outs = run_op(node, args)
        except errors.UnimplementedError as error:
            raise self._not_static(node, args, error) from error
        for k, v in enumerate(outs):
            env[(name, k)] = v
        if not outs:
            env[(name, 0)] = None
        return res

    def _dead(self, name: str, env: dict[Tensor, Any]) -> bool:
        """Whether a control edge from node ``name`` is dead. As in TensorFlow's executor, that is the
        node's deadness, not its first output's: a ``Switch`` is dead only when its input is (both its
        outputs are), so a control edge from a loop's ``Switch`` into the body (TF's gradient of a pop
        under a cond in a loop has one) is live while one of its outputs is dead."""
        if name in self.g.nodes and self.g.nodes[name].op in ("Switch", "RefSwitch"):
            return env.get((name, 0)) is DEAD and env.get((name, 1)) is DEAD
        return env.get((name, 0)) is DEAD

    def _branch_predicate(self, a: Tensor, b: Tensor) -> Optional[tuple[Tensor, bool]]:
        """The predicate and polarity under which ``a`` is computed and ``b`` under the other polarity:
        the cond whose two branches a ``Merge`` of ``a`` and ``b`` joins, or None."""
        ga, gb = self.g.guards.get(a, frozenset()), self.g.guards.get(b, frozenset())
        return next(((p, pol) for p, pol in ga if (p, not pol) in gb), None)

    def _check_one_branch(self, node: Node, live: int, env: dict[Tensor, Any]) -> None:
        """A cond's ``Merge`` with one live input must have a static predicate: under a run-time one both
        branches run, so a dead branch there is the importer's own failure, never a value to pick."""
        if len(node.inputs) != 2:
            return
        separating = self._branch_predicate(*node.inputs)
        if separating is None:
            return
        pred = separating[0]
        value = _resources.known(env.get(pred))
        if value is not None and value is not DEAD and not is_static(value) and not isinstance(value, Dyn):
            dead = node.inputs[1 - live]
            GraphError.INTERNAL.raise_(node=node.name, op=node.op, error=f"its input {dead[0]}:{dead[1]} has no "
                                        f"value, though the predicate {pred[0]}:{pred[1]} is only known at run time")

    def _merge(self, node: Node, args: list[Any], env: dict[Tensor, Any]) -> tuple[Any, Any]:
        live = [(k, a) for k, a in enumerate(args) if a is not DEAD]
        if not live:
            return DEAD, DEAD
        if len(live) == 1:
            self._check_one_branch(node, live[0][0], env)
            return live[0][1], np.asarray(live[0][0], np.int32)
        if any(isinstance(a, Dyn) for _, a in live):
            return Dyn(), Dyn()
        (i, a), (j, b) = live[0], live[1]
        pred = self._branch_predicate(node.inputs[i], node.inputs[j])
        if pred is None or len(live) > 2:
            ga, gb = self.g.guards.get(node.inputs[i], frozenset()), self.g.guards.get(node.inputs[j], frozenset())
            GraphError.LOOP_STRUCTURE.raise_(frame=node.name, what=f"a Merge whose inputs are not two branches "
                                              f"({len(live)} live, guards {sorted(ga)} and {sorted(gb)})")
        p = _resources.known(env[pred[0]])
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                GraphError.MERGE_HANDLES.raise_(node=node.name, a=a, b=b)
            return a, jnp.where(p, i, j) if pred[1] else jnp.where(p, j, i)
        t, f = (a, b) if pred[1] else (b, a)
        if np.shape(t) != np.shape(f):
            if not self.g.only_before_exit(node.name, pred[0]):
                GraphError.MERGE_SHAPES.raise_(node=node.name, a=np.shape(a), b=np.shape(b), way_out=_merge_way_out(node))
            # The False side runs only in the step after which the loop exits, and feeds only the next
            # step's variables, which nothing reads then (pfor's converted while loop returns [] there).
            return t, np.asarray(i if pred[1] else j, np.int32)
        return jnp.where(p, t, f), jnp.where(p, i if pred[1] else j, j if pred[1] else i).astype(jnp.int32)

    def _resource(self, node: Node, args: list[Any], env: dict[Tensor, Any], res: Resources) -> Resources:
        guard = self.g.guards.get((node.name, 0), frozenset())
        conds = [(env[p], pol) for p, pol in guard if not is_static(_resources.known(env.get(p)))]
        if conds and node.op in ("StackPopV2", "StackPop"):
            res = _resources.buffered(res, args[0])  # a pop that may not happen: the top becomes a traced index
        if conds and node.op in ("StackPushV2", "StackPush") and not self.ctx.recorders:
            res = _pushable(res, args[0], args[1])  # a push that may not happen: likewise
        ok = functools.reduce(jnp.logical_and, [p if pol else jnp.logical_not(p) for p, pol in conds]) \
            if conds else None
        if ok is not None and node.op in CHECKED_OPS and not self.ctx.recorders:
            checked = self._only_where(node, args, res, ok)
            if checked is not None:
                new, outs = checked
                for k, v in enumerate(outs):
                    env[(node.name, k)] = v
                return new
        new, outs = _resources.RESOURCE_OPS[node.op](self.ctx, node, args, res)
        for k, v in enumerate(outs):
            env[(node.name, k)] = v
        if node.op == "TensorArraySizeV3" and not is_static(outs[0]):  # named if an op needs it static
            self.sizes[id(outs[0])] = (outs[0], self._array_node(args[0]))
        if ok is None:
            return new
        if self.ctx.recorders and jax.tree.structure(new) != jax.tree.structure(res):
            return new  # a loop body traced for what it creates: the loop makes its buffers, then runs it
        runtime = frozenset((p, pol) for p, pol in guard if not is_static(_resources.known(env.get(p))))
        selected, change = select(ok, new, res, self.made_under(new, runtime))
        if selected is None:
            GraphError.GUARDED_STATE.raise_(node=node.name, op=node.op, what=change)
        return selected

    def _not_static(self, node: Node, args: list[Any], error: Exception) -> Exception:
        """``error`` (an op's :data:`GraphError.NOT_STATIC`) with the way out where the value is known
        outside ``jax.jit``: the size of an array a while loop grows at run time (``stack()``,
        ``concat()``), or a value computed in a loop body traced as a ``lax`` loop."""
        head, tail = f"Node {node.name} ({node.op}): ", GraphError.NOT_STATIC.template.split("{what}")[1]
        text = str(error)
        if not (text.startswith(head) and text.endswith(tail)):
            return error
        sizes = [self.sizes[id(a)][1] for a in args if id(a) in self.sizes]
        if sizes:
            hint = (f" (here the size of the array of TensorArrayV3 node {sizes[0]}, which a while loop sets at "
                    f"run time, so the result's shape is known at run time only: call the imported function "
                    f"through jta.checked, which learns the size at run time, or outside jax.jit, with concrete "
                    f"inputs, or read the array with gather() at static indices)")
        elif self.ctx.depth:
            hint = (" (here in a while loop traced as a lax loop: call the imported function outside jax.jit, "
                    "with concrete inputs, where the loop runs step by step and its counters are known)")
        else:
            return error
        return GraphError.NOT_STATIC.exception(node=node.name, op=node.op, what=text[len(head):-len(tail)] + hint)

    def _only_where(self, node: Node, args: list[Any], res: Resources, ok: Any
                    ) -> Optional[tuple[Resources, list[Any]]]:
        """A TensorArray op under a run-time condition as a ``lax.cond`` on it: its checks (an index out
        of range, a second write, a read of a cleared element) fire only where its branch is taken, as
        TensorFlow runs that branch only. None when the op changes the resources' structure or needs its
        arguments static (an array of unknown element shape): it then runs in line and is selected."""
        arrays = {k: a for k, a in enumerate(args) if not isinstance(a, str)}  # handles stay static

        def taken(operands: tuple[Resources, dict[int, Any]]) -> tuple[Resources, list[Any]]:
            resources, values = operands  # traced here: a concrete index would be checked while tracing
            new, outs = _resources.RESOURCE_OPS[node.op](
                self.ctx, node, [values.get(k, a) for k, a in enumerate(args)], resources)
            return new, [jnp.asarray(v) for v in outs]

        operands = (res, {k: jnp.asarray(a) for k, a in arrays.items()})
        try:
            new_shape, outs_shape = jax.eval_shape(taken, operands)
        except Exception:  # noqa: BLE001 - an op that needs static arguments runs unguarded, then selected
            return None
        if jax.tree.structure(new_shape) != jax.tree.structure(res) or any(
                np.shape(a) != np.shape(b) or np.dtype(a.dtype) != np.dtype(jnp.result_type(b))
                for a, b in zip(jax.tree.leaves(new_shape), jax.tree.leaves(res), strict=True)):
            return None

        def skipped(operands: tuple[Resources, dict[int, Any]]) -> tuple[Resources, list[Any]]:
            return operands[0], [jnp.zeros(v.shape, v.dtype) for v in outs_shape]

        return jax.lax.cond(ok, taken, skipped, operands)

    # -- the whole graph ----------------------------------------------------------------------
    def outputs(self, feeds: dict[Tensor, Any], outputs: list[Tensor]) -> list[Any]:
        env = dict(feeds)
        roots = tuple(dict.fromkeys(t[0] for t in outputs))
        self.run("", self.g.schedule("", roots, False), env, Resources())
        return [env[t] for t in outputs]


def _pushable(res: Resources, handle: Any, value: Any) -> Resources:
    """``res`` with the stack ``handle`` as a buffer with a traced top, ready for a push that happens only
    where a run-time condition holds (a stack of handles or static values stays as it is)."""
    stack = res.stacks.get(handle) if isinstance(handle, str) else None
    if stack is None or stack.const is not None or stack.data is not None or isinstance(value, str):
        return res
    return Resources(res.arrays, {**res.stacks, handle: _resources.as_buffer(stack, len(stack.items), value)})


def _merge_way_out(node: Node) -> str:
    """What to do about a Merge of two shapes under a run-time condition."""
    way_out = "Feed the cond's predicate as a constant (the branch not taken is then pruned)"
    if node.name.startswith("gradients") and "cond_grad" in node.name:
        # TF's gradient of a Gather (embedding_lookup) is IndexedSlices, whose rows are the gathered ones
        # in the branch taken and the whole table in the other: their count differs.
        return (f"This is TensorFlow's gradient of a cond whose branch gives sparse gradients (IndexedSlices, "
                f"e.g. of tf.gather or tf.nn.embedding_lookup): {way_out[0].lower()}{way_out[1:]}, or differentiate "
                f"the imported forward graph with jax.grad instead of importing TF's gradient graph.")
    return way_out + "."


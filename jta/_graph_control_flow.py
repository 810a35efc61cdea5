"""Control flow v1 of an imported graph: while frames to ``lax.scan``/``while_loop``, conds to selects.

**Frames.** Every ``Enter`` names a frame; a node belongs to the frame of its inputs, an ``Exit``
to the parent frame. A frame's loop variables are its ``Merge(Enter, NextIteration)`` nodes, its
``LoopCond`` drives the ``Switch`` of each variable; ``Enter(is_constant=True)`` brings loop
invariants (TensorArray and stack handles among them). A frame runs as one item of its parent's
schedule; a body runs every node of the frame that the ``NextIteration`` nodes need through data
and control edges (TensorFlow's own rule: the v1 gradient's stack pushes hang off control edges).

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

**Conds.** A ``Switch`` with a static predicate kills the other branch (TensorFlow's dead
tensors); with a run-time predicate both branches run, a ``Merge`` selects, and a stateful op
inside a branch updates the resources only where its branch conditions hold (a stack popped there
becomes a buffer with a traced top first, so its structure does not depend on the branch).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _graph_resources as GR
from ._catalogue import Error
from ._graph_def import Node, Tensor
from ._graph_ops import OPS, is_static
from ._graph_resources import Context, Recorder, Resources

CONTROL_OPS = ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond", "Placeholder", "RefEnter",
               "RefExit", "RefMerge", "RefSwitch", "RefNextIteration")


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


DEAD = _Marker("DEAD")  # the untaken side of a Switch with a static predicate


@dataclasses.dataclass(frozen=True)
class Dyn:
    """A value unknown during partial evaluation (its shape when known)."""

    shape: Optional[tuple[int, ...]] = None


@dataclasses.dataclass
class Frame:
    name: str
    parent: str = ""
    enters: list[str] = dataclasses.field(default_factory=list)
    merges: list[str] = dataclasses.field(default_factory=list)
    var_enter: dict[str, str] = dataclasses.field(default_factory=dict)
    next_of: dict[str, str] = dataclasses.field(default_factory=dict)
    switch_of: dict[str, str] = dataclasses.field(default_factory=dict)
    exit_var: dict[str, str] = dataclasses.field(default_factory=dict)
    loopcond: Optional[str] = None
    pops: list[str] = dataclasses.field(default_factory=list)


class Graph:
    """The frames, guards and schedules of a node table (static analysis, no values)."""

    def __init__(self, nodes: dict[str, Node], fed: set[Tensor]):
        self.nodes = nodes
        self.fed_nodes = {t[0] for t in fed}
        self.issues: list[str] = []
        self.frame_of: dict[str, Optional[str]] = {}
        self.frames: dict[str, Frame] = {}
        self._frames()
        self.guards: dict[Tensor, frozenset[tuple[Tensor, bool]]] = {}
        self._guards()

    def _sources(self, node: Node) -> list[str]:
        return [t[0] for t in node.inputs] + list(node.control)

    def order(self) -> list[str]:
        """Topological order without the back edges (``NextIteration`` → ``Merge``)."""
        indeg, users = {}, {}
        for name, node in self.nodes.items():
            srcs = [s for s in self._sources(node) if s in self.nodes and self.nodes[s].op != "NextIteration"]
            indeg[name] = len(srcs)
            for s in srcs:
                users.setdefault(s, []).append(name)
        ready = [n for n, d in indeg.items() if d == 0]
        out = []
        while ready:
            n = ready.pop()
            out.append(n)
            for u in users.get(n, ()):
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
        if len(out) != len(self.nodes):
            self.issues.append("a cycle that is not a while loop's NextIteration edge")
        return out

    def _frames(self) -> None:
        nodes = self.nodes
        for name in self.order():
            node = nodes[name]
            srcs = [s for s in self._sources(node) if s in nodes and nodes[s].op != "NextIteration"]
            for s in self._sources(node):
                if s not in nodes:
                    self.issues.append(f"node {name} has an unknown input {s}")
            if node.op in ("Enter", "RefEnter"):
                frame = str(node.attr("frame_name"))
                outer = self.frame_of.get(node.inputs[0][0]) or "" if node.inputs else ""
                f = self.frames.setdefault(frame, Frame(frame, outer))
                f.enters.append(name)
                self.frame_of[name] = frame
            elif node.op in ("Exit", "RefExit"):
                inner = self.frame_of.get(srcs[0]) if srcs else None
                self.frame_of[name] = self.frames[inner].parent if inner in self.frames else ""
            else:
                fs = [self.frame_of[s] for s in srcs if self.frame_of.get(s) is not None]
                if not srcs and node.op not in ("Placeholder", "PlaceholderWithDefault"):
                    self.frame_of[name] = None  # a constant: usable in any frame
                else:
                    self.frame_of[name] = fs[0] if fs else ""
        for name, node in nodes.items():
            frame = self.frame_of.get(name)
            if node.op in ("Merge", "RefMerge") and any(nodes[t[0]].op == "NextIteration" for t in node.inputs
                                                         if t[0] in nodes):
                f = self.frames.get(frame or "")
                enters = [t[0] for t in node.inputs if nodes[t[0]].op != "NextIteration"]
                nexts = [t[0] for t in node.inputs if nodes[t[0]].op == "NextIteration"]
                if f is None or len(enters) != 1 or len(nexts) != 1:
                    self.issues.append(f"Merge {name}: not a while loop variable (Merge(Enter, NextIteration))")
                    continue
                f.merges.append(name)
                f.var_enter[name], f.next_of[name] = enters[0], nexts[0]
            elif node.op == "LoopCond" and frame in self.frames:
                self.frames[frame].loopcond = name
        for name, node in nodes.items():
            if node.op in ("Switch", "RefSwitch") and len(node.inputs) == 2 and \
                    nodes.get(node.inputs[1][0], node).op == "LoopCond":
                f = self.frames.get(self.frame_of.get(name) or "")
                if f is not None:
                    f.switch_of[node.inputs[0][0]] = name
            if node.op in ("StackPopV2", "StackPop") and self.frame_of.get(name) in self.frames:
                self.frames[self.frame_of[name] or ""].pops.append(name)
        for name, node in nodes.items():
            if node.op in ("Exit", "RefExit") and node.inputs:
                sw = nodes.get(node.inputs[0][0])
                f = self.frames.get(self.frame_of.get(node.inputs[0][0]) or "")
                if sw is None or f is None or sw.op not in ("Switch", "RefSwitch") or sw.inputs[0][0] not in f.merges:
                    self.issues.append(f"Exit {name}: not the exit of a while loop variable")
                    continue
                f.exit_var[name] = sw.inputs[0][0]
        for f in self.frames.values():
            if f.loopcond is None:
                self.issues.append(f"while frame {f.name} has no LoopCond")
            for e in f.enters:
                if not self.nodes[e].attr("is_constant") and not any(f.var_enter[m] == e for m in f.merges):
                    self.issues.append(f"Enter {e}: a loop variable without its Merge")

    def is_loop_switch(self, name: str) -> bool:
        node = self.nodes[name]
        return node.op in ("Switch", "RefSwitch") and self.nodes[node.inputs[1][0]].op == "LoopCond"

    def is_loop_merge(self, name: str) -> bool:
        f = self.frames.get(self.frame_of.get(name) or "")
        return f is not None and name in f.merges

    @functools.cache  # noqa: B019 (one Graph per import; lives as long as its function)
    def only_before_exit(self, merge: str, pred: Tensor) -> bool:
        """Whether the Merge ``merge`` (of a cond on ``pred``) feeds only ``NextIteration`` nodes of its
        frame (through ``Identity``), and ``pred`` is the value the frame's ``LoopCond`` reads in the next
        step: where ``pred`` is False the loop exits and the merged value is never read."""
        f = self.frames.get(self.frame_of.get(merge) or "")
        if f is None or f.loopcond is None:
            return False
        var = self._canonical(self.nodes[f.loopcond].inputs[0])
        if var[0] not in f.merges or self._canonical(self.nodes[f.next_of[var[0]]].inputs[0]) != \
                self._canonical(pred):
            return False
        users: dict[str, list[str]] = {}
        for name, node in self.nodes.items():
            for s in self._sources(node):
                users.setdefault(s, []).append(name)
        todo, seen = [merge], set()
        while todo:
            n = todo.pop()
            for u in users.get(n, ()):
                op = self.nodes[u].op
                if op in ("NextIteration", "RefNextIteration"):
                    continue
                if op not in ("Identity", "RefIdentity") or u in seen:
                    return False
                seen.add(u)
                todo.append(u)
        return True

    def _canonical(self, t: Tensor) -> Tensor:
        """A predicate through ``Identity`` nodes (``cond/pred_id`` is ``Identity(pred)``)."""
        while t[0] in self.nodes and self.nodes[t[0]].op == "Identity" and self.nodes[t[0]].inputs:
            t = self.nodes[t[0]].inputs[0]
        return t

    def _guards(self) -> None:
        empty: frozenset[tuple[Tensor, bool]] = frozenset()
        node_guard: dict[str, frozenset[tuple[Tensor, bool]]] = {}
        for name in self.order():
            node = self.nodes[name]
            ins = [self.guards.get(t, empty) for t in node.inputs]
            ctl = [node_guard.get(c, empty) for c in node.control]
            if node.op in ("Enter", "RefEnter", "Exit", "RefExit") or self.is_loop_merge(name) \
                    or (node.op in ("Switch", "RefSwitch") and self.is_loop_switch(name)):
                g = empty
                self.guards[(name, 0)] = self.guards[(name, 1)] = g
            elif node.op in ("Switch", "RefSwitch"):
                g = frozenset().union(*ins, *ctl)
                pred = self._canonical(node.inputs[1])
                self.guards[(name, 0)] = g | {(pred, False)}
                self.guards[(name, 1)] = g | {(pred, True)}
            elif node.op in ("Merge", "RefMerge"):
                g = functools.reduce(frozenset.intersection, ins) if ins else empty
                self.guards[(name, 0)] = self.guards[(name, 1)] = g
            else:
                g = frozenset().union(*ins, *ctl)
                for k in range(8):
                    self.guards[(name, k)] = g
            node_guard[name] = g

    @functools.cache  # noqa: B019 (one Graph per import; lives as long as its function)
    def schedule(self, frame: str, roots: tuple[str, ...], data_only: bool) -> tuple[Any, ...]:
        """The items (node names, or ``("loop", frame)``) to run in ``frame`` for ``roots``, in order."""
        out: list[Any] = []
        seen: set[Any] = set()
        stack: list[tuple[Any, bool]] = [(self._item(frame, r), False) for r in reversed(roots)]
        while stack:
            item, expanded = stack.pop()
            if expanded:
                out.append(item)
                continue
            if item in seen:
                continue
            seen.add(item)
            deps = self._deps(frame, item, data_only)
            if deps is None:
                continue  # a leaf: its value is given
            stack.append((item, True))
            stack.extend((d, False) for d in reversed(deps) if d not in seen)
        return tuple(out)

    def _deps(self, frame: str, item: Any, data_only: bool) -> Optional[list[Any]]:
        if isinstance(item, tuple):  # a loop: what its Enters read
            return [self._item(frame, t[0]) for e in self.frames[item[1]].enters for t in self.nodes[e].inputs]
        node = self.nodes[item]
        f = self.frames.get(frame)
        if item in self.fed_nodes or (f is not None and (item in f.enters or item in f.merges
                                                         or item in f.switch_of.values())):
            return None
        srcs = [t[0] for t in node.inputs] + ([] if data_only else list(node.control))
        return [self._item(frame, s) for s in srcs]

    def _item(self, frame: str, name: str) -> Any:
        node = self.nodes[name]
        if node.op in ("Exit", "RefExit") and name not in self.fed_nodes:
            inner = self.frame_of.get(node.inputs[0][0]) or ""
            while self.frames[inner].parent != frame and inner in self.frames:
                inner = self.frames[inner].parent
            return ("loop", inner)
        return name


@dataclasses.dataclass
class Options:
    stack_capacity: Optional[int] = None
    max_unroll: int = 256
    max_trip: int = 1_000_000
    max_bound: int = 10_000  # the most steps of a loop whose count is only bounded (a masked lax.scan)


class _Unstable(Exception):
    """A loop body changes the structure of its carry (internal: the loop is unrolled instead)."""


class Runner:
    """Runs the graph: one instance per call of the imported function."""

    def __init__(self, graph: Graph, ctx: Context, options: Options):
        self.g, self.ctx, self.opt = graph, ctx, options
        self.whiles = 0  # lax.while_loops built so far (a scan whose body builds one is unrolled instead)

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
        args = [env.get(t, DEAD) for t in node.inputs]
        name = node.name
        dead = any(a is DEAD for a in args) or any(env.get((c, 0)) is DEAD for c in node.control)
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
        if probe and any(isinstance(a, Dyn) for a in args) or probe and node.op in GR.RESOURCE_OPS:
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
        if node.op in GR.RESOURCE_OPS:
            return self._resource(node, args, env, res)
        outs = OPS[node.op](node, args)
        for k, v in enumerate(outs):
            env[(name, k)] = v
        if not outs:
            env[(name, 0)] = None
        return res

    def _merge(self, node: Node, args: list[Any], env: dict[Tensor, Any]) -> tuple[Any, Any]:
        live = [(k, a) for k, a in enumerate(args) if a is not DEAD]
        if not live:
            return DEAD, DEAD
        if len(live) == 1:
            return live[0][1], np.asarray(live[0][0], np.int32)
        if any(isinstance(a, Dyn) for _, a in live):
            return Dyn(), Dyn()
        (i, a), (j, b) = live[0], live[1]
        ga, gb = self.g.guards.get(node.inputs[i], frozenset()), self.g.guards.get(node.inputs[j], frozenset())
        pred = next(((p, pol) for p, pol in ga if (p, not pol) in gb), None)
        if pred is None or len(live) > 2:
            Error.GRAPH_LOOP_STRUCTURE.raise_(frame=node.name, what=f"a Merge whose inputs are not two branches "
                                              f"({len(live)} live, guards {sorted(ga)} and {sorted(gb)})")
        p = env[pred[0]]
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                Error.GRAPH_MERGE_HANDLES.raise_(node=node.name, a=a, b=b)
            return a, jnp.where(p, i, j) if pred[1] else jnp.where(p, j, i)
        t, f = (a, b) if pred[1] else (b, a)
        if np.shape(t) != np.shape(f):
            if not self.g.only_before_exit(node.name, pred[0]):
                Error.GRAPH_MERGE_SHAPES.raise_(node=node.name, a=np.shape(a), b=np.shape(b))
            # The False side runs only in the step after which the loop exits, and feeds only the next
            # step's variables, which nothing reads then (pfor's converted while loop returns [] there).
            return t, np.asarray(i if pred[1] else j, np.int32)
        return jnp.where(p, t, f), jnp.where(p, i if pred[1] else j, j if pred[1] else i).astype(jnp.int32)

    def _resource(self, node: Node, args: list[Any], env: dict[Tensor, Any], res: Resources) -> Resources:
        guard = self.g.guards.get((node.name, 0), frozenset())
        conds = [(env[p], pol) for p, pol in guard if not is_static(env.get(p))]
        if conds and node.op in ("StackPopV2", "StackPop"):
            res = GR.buffered(res, args[0])  # a pop that may not happen: the top becomes a traced index
        new, outs = GR.RESOURCE_OPS[node.op](self.ctx, node, args, res)
        for k, v in enumerate(outs):
            env[(node.name, k)] = v
        if conds:
            ok = functools.reduce(jnp.logical_and, [p if pol else jnp.logical_not(p) for p, pol in conds])
            if jax.tree.structure(new) != jax.tree.structure(res):
                Error.GRAPH_LOOP_STRUCTURE.raise_(frame=node.name, what="a stateful op under a run-time condition "
                                                  "changes the resources' structure")
            new = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, res)
        return new

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
        return {(e, 0): outer.get(self.g.nodes[e].inputs[0], DEAD) for e in f.enters
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
                vals = {m: cur[m] if m in static else Dyn(_shape(init[m])) for m in init}
                env = self._body_env(f, outer, vals)
                pred = self._pred(f, env, res, probe=True)
                if not is_static(pred):
                    if not self._static_conjunct(f, env):
                        return None, traj, cur, False
                    bounded = True
                elif not bool(pred):
                    if bounded:
                        cur = {m: init[m] for m in static if all(_same(v, init[m]) for v in (*traj[m], cur[m]))}
                    return n, traj, cur, bounded
                self.run(f.name, self.g.schedule(f.name, roots, True), env, res, probe=True)
                nxt = {m: env[(f.next_of[m], 0)] for m in static}
                lost = {m for m, v in nxt.items() if not is_static(v)}
                if lost:
                    static -= lost
                    restart = True
                    break
                if bounded and all(_same(nxt[m], cur[m]) for m in static):
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
        init = {m: outer.get(self.g.nodes[f.var_enter[m]].inputs[0], DEAD) for m in f.merges}
        n, traj, finals, bounded = self._probe(f, outer, init, res)
        if probe:
            for e, m in f.exit_var.items():
                env_v = finals[m] if (n is not None and m in finals) else Dyn(_shape(init[m]))
                outer[(e, 0)] = env_v
            return res
        if n == 0:
            final = dict(init)
        elif bounded and n is not None:
            try:
                res, final = self._masked_scan(f, outer, init, n, traj, res)
            except _Unstable:
                res, final = self._while(f, outer, init, traj, res)
        elif n is None:
            res, final = self._while(f, outer, init, traj, res)
        else:
            try:
                res, final = self._scan(f, outer, init, n, traj, finals, res)
            except _Unstable as why:
                if n > self.opt.max_unroll:
                    Error.GRAPH_LOOP_STRUCTURE.raise_(frame=name, what=f"cannot be a lax.scan ({why}) and its "
                                                      f"{n} steps are more than max_unroll={self.opt.max_unroll}")
                res, final = self._unroll(f, outer, init, n, traj, finals, res)
        for e, m in f.exit_var.items():
            outer[(e, 0)] = final[m]
        return res

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
            h = env.get(self.g.nodes[p].inputs[0])
            if isinstance(h, str) and h in res.stacks and isinstance(res.stacks[h].const, str):
                res = GR.renew_accumulators(res, res.stacks[h].const)
        roots = tuple(f.next_of[m] for m in f.merges)
        res = self.run(f.name, self.g.schedule(f.name, roots, False), env, res)
        return res, {m: env[(f.next_of[m], 0)] for m in f.merges}

    def _unroll(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
                traj: dict[str, list[Any]], finals: dict[str, Any], res: Resources
                ) -> tuple[Resources, dict[str, Any]]:
        values = dict(init)
        for k in range(n):
            values.update({m: t[k] for m, t in traj.items()})
            res, values = self.body(f, outer, res, values, traced=False)
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
        for attempt in range(2):
            rec = Recorder()
            outer_recs, self.ctx.recorders = self.ctx.recorders, [rec]
            try:
                out_res, out_carry = jax.eval_shape(step, res, carry, x0)
            except Exception as e:  # noqa: BLE001 - any failure of the scan body means "unroll it"
                if n is None:
                    raise
                raise _Unstable(f"{type(e).__name__}: {str(e)[:200]}") from e
            finally:
                self.ctx.recorders = outer_recs
            same = jax.tree.structure(out_res) == jax.tree.structure(res) and all(
                _aval(a) == _aval(b) for a, b in zip(jax.tree.leaves((out_res, out_carry)),
                                                     jax.tree.leaves((res, carry)), strict=True))
            if same:
                return res
            if attempt == 1:
                raise _Unstable("the loop body changes the structure of its carry")
            res = self._create(f, res, out_res, rec, n)
        return res

    def _create(self, f: Frame, res: Resources, out: Resources, rec: Recorder, n: Optional[int]) -> Resources:
        state = res.arrays
        arrays = dict(state.arrays)
        for h, ta in out.arrays.arrays.items():
            if h not in arrays:
                arrays[h] = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), ta)
        state = dataclasses.replace(state, arrays=arrays)
        res = Resources(state, res.stacks)
        for h, src, prepend in rec.grads:
            if (h, src) not in res.arrays.grads:
                res = GR.precreate_grad(self.ctx, res, h, src, prepend)
        stacks = dict(res.stacks)
        for h, pushed in rec.pushes.items():
            s = stacks[h]
            if s.const is not None or s.data is not None:
                continue
            values = [v for v, _ in pushed]
            if not s.items and all(isinstance(v, str) or is_static(v) for v in values) and \
                    len({GR.const_key(v) for v in values}) == 1:
                stacks[h] = GR.Stack(const=GR.const_key(values[0]))
                continue
            mults = [mult for _, mult in pushed]
            per_step = None if None in mults else sum(int(m or 0) for m in mults)
            if n is not None and per_step is not None:
                capacity = len(s.items) + n * per_step
            elif self.opt.stack_capacity is not None:
                capacity = self.opt.stack_capacity
            else:
                Error.GRAPH_STACK_CAPACITY.raise_(stack=h, frame=f.name)
            stacks[h] = GR.as_buffer(s, capacity, values[0])
        for h in rec.popped:
            s = stacks[h]
            if s.const is None and s.data is None and s.items:
                stacks[h] = GR.as_buffer(s, len(s.items), s.items[0])
        return Resources(res.arrays, stacks)

    def _scan(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
              traj: dict[str, list[Any]], finals: dict[str, Any], res: Resources
              ) -> tuple[Resources, dict[str, Any]]:
        consts, xs, carried = self._split_vars(f, init, traj)
        carry0 = {m: _array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: dict[str, Any]) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **x, **c})
            return r, {m: _like(nxt[m], c[m], f.name) for m in carried}

        x0 = {m: v[0] for m, v in xs.items()}
        whiles = self.whiles
        res = self._prepare(f, step, res, carry0, x0, n)
        if self.whiles > whiles and xs:  # an inner trip count depends on the step: unrolled, it may be static
            raise _Unstable("a nested loop's trip count depends on the step")
        recs = self.ctx.recorders
        for r in recs:
            r.multiplier = None if r.multiplier is None else r.multiplier * n
        try:
            (res, carry), _ = jax.lax.scan(lambda c, x: (step(c[0], c[1], x), None), (res, carry0), xs, length=n)
        finally:
            for r in recs:
                r.multiplier = None if r.multiplier is None else r.multiplier // n
        return res, {**finals, **carry}

    def _masked_scan(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], n: int,
                     traj: dict[str, list[Any]], res: Resources) -> tuple[Resources, dict[str, Any]]:
        """A loop whose count is known at run time only but is at most ``n``: a ``lax.scan`` of ``n``
        steps, each a ``lax.cond`` on the loop condition (still true), so reverse mode works."""
        consts = {m: v for m, v in self._split_vars(f, init, traj)[0].items() if _same(v, init[m])}
        carried = [m for m in f.merges if m not in consts]
        carry0 = {m: _array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: Any) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **c})
            return r, {m: _like(nxt[m], c[m], f.name) for m in carried}

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
            (res, carry, _), _ = jax.lax.scan(masked, (res, carry0, jnp.asarray(True)), None, length=n)
        finally:
            for r in recs:
                r.multiplier = None if r.multiplier is None else r.multiplier // n
        return res, {**consts, **carry}

    def _while(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], traj: dict[str, list[Any]],
               res: Resources) -> tuple[Resources, dict[str, Any]]:
        consts = self._invariants(f, outer, init, res)
        carried = [m for m in f.merges if m not in consts]
        carry0 = {m: _array(init[m]) for m in carried}

        def step(r: Resources, c: dict[str, Any], x: Any) -> tuple[Resources, dict[str, Any]]:
            r, nxt = self.body(f, outer, r, {**consts, **c})
            return r, {m: _like(nxt[m], c[m], f.name) for m in carried}

        def cond(state: tuple[Resources, dict[str, Any]]) -> Any:
            env = self._body_env(f, outer, {**consts, **state[1]})
            return jnp.asarray(self._pred(f, env, state[0], probe=False))

        self.whiles += 1
        res = self._prepare(f, step, res, carry0, None, None)
        recs, saved = self.ctx.recorders, [r.multiplier for r in self.ctx.recorders]
        for r in recs:
            r.multiplier = None
        try:
            res, carry = jax.lax.while_loop(cond, lambda s: step(s[0], s[1], None), (res, carry0))
        finally:
            for r, m in zip(recs, saved, strict=True):
                r.multiplier = m
        return res, {**consts, **carry}

    def _invariants(self, f: Frame, outer: dict[Tensor, Any], init: dict[str, Any], res: Resources
                    ) -> dict[str, Any]:
        """Static loop variables that every step passes through unchanged (they stay static)."""
        static = {m for m, v in init.items() if is_static(v)}
        while static:
            vals = {m: init[m] if m in static else Dyn(_shape(init[m])) for m in init}
            env = self._body_env(f, outer, vals)
            roots = tuple(f.next_of[m] for m in sorted(static))
            self.run(f.name, self.g.schedule(f.name, roots, True), env, res, probe=True)
            keep = {m for m in static if is_static(env[(f.next_of[m], 0)])
                    and np.array_equal(env[(f.next_of[m], 0)], init[m])}
            if keep == static:
                break
            static = keep
        return {m: init[m] for m in static}

    # -- the whole graph ----------------------------------------------------------------------
    def outputs(self, feeds: dict[Tensor, Any], outputs: list[Tensor]) -> list[Any]:
        env = dict(feeds)
        roots = tuple(dict.fromkeys(t[0] for t in outputs))
        self.run("", self.g.schedule("", roots, False), env, Resources())
        return [env[t] for t in outputs]


def _shape(v: Any) -> Optional[tuple[int, ...]]:
    return v.shape if isinstance(v, Dyn) else (None if isinstance(v, str) or v is DEAD else tuple(np.shape(v)))


def _same(a: Any, b: Any) -> bool:
    return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype


def _aval(x: Any) -> Any:
    return (tuple(np.shape(x)), str(getattr(x, "dtype", type(x))))


def _array(v: Any) -> Any:
    return jnp.asarray(v)


def _like(v: Any, like: Any, frame: str) -> Any:
    if isinstance(v, str) or v is DEAD or np.shape(v) != np.shape(like):
        Error.GRAPH_LOOP_STRUCTURE.raise_(frame=frame, what=f"a loop variable changes shape from {np.shape(like)} "
                                          f"to {_shape(v)} (shape invariants are not supported)")
    return jnp.asarray(v, like.dtype)

"""The static structure of an imported graph's control flow v1: while frames, cond guards, schedules.

**Frames.** Every ``Enter`` names a frame; a node belongs to the frame of its inputs, an ``Exit``
to the parent frame. A frame's loop variables are its ``Merge(Enter, NextIteration)`` nodes, its
``LoopCond`` drives the ``Switch`` of each variable; ``Enter(is_constant=True)`` brings loop
invariants (TensorArray and stack handles among them). A frame runs as one item of its parent's
schedule; a body runs every node of the frame that the ``NextIteration`` nodes need through data
and control edges (TensorFlow's own rule: the v1 gradient's stack pushes hang off control edges).

**Guards.** Each tensor carries the cond predicates (and their polarities) under which it is live,
so that a run-time ``Merge`` finds the predicate that tells its two branches apart and a stateful op
inside a branch knows the conditions of its update (:mod:`jta.graph_import._control_flow`). A while
frame inside a branch has the guards of what its ``Enter`` nodes read (its ``Exit`` nodes carry
them; inside the body the guards start empty): the loop runs only where they hold.

All of it is analysis of the node table, without values: :mod:`jta.graph_import._loops` and
:mod:`jta.graph_import._control_flow` run what it finds.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

from ._nodes import Node, Tensor


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
        """Every tensor's guards, and every frame's (:attr:`frame_guards`): a frame inside a cond
        branch runs under the union of the guards of what its ``Enter`` nodes read, and its ``Exit``
        nodes carry them, so the cond's ``Merge`` sees its two branches. A frame's ``Enter`` nodes may
        come after one of its ``Exit`` nodes in the order, hence the passes until nothing changes."""
        self.frame_guards: dict[str, frozenset[tuple[Tensor, bool]]] = {}
        for _ in range(len(self.frames) + 1):
            before = dict(self.frame_guards)
            self._guard_pass()
            if self.frame_guards == before:
                break

    def _guard_pass(self) -> None:
        empty: frozenset[tuple[Tensor, bool]] = frozenset()
        node_guard: dict[str, frozenset[tuple[Tensor, bool]]] = {}
        for name in self.order():
            node = self.nodes[name]
            ins = [self.guards.get(t, empty) for t in node.inputs]
            ctl = [node_guard.get(c, empty) for c in node.control]
            if node.op in ("Enter", "RefEnter"):
                frame = self.frame_of.get(name) or ""
                self.frame_guards[frame] = self.frame_guards.get(frame, empty).union(*ins, *ctl)
                g = empty
                self.guards[(name, 0)] = self.guards[(name, 1)] = g
            elif node.op in ("Exit", "RefExit"):
                inner = self.frame_of.get(node.inputs[0][0]) if node.inputs else None
                g = self.frame_guards.get(inner or "", empty)
                self.guards[(name, 0)] = self.guards[(name, 1)] = g
            elif self.is_loop_merge(name) or (node.op in ("Switch", "RefSwitch") and self.is_loop_switch(name)):
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

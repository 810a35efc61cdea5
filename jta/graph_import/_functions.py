"""A TF2 function graph and its library as bodies that run node by node on JAX values.

A ``tf.function`` graph is a DAG: control flow is *functional* (``While``, ``If``, ``Case`` and the
call ops name functions of the graph's library) and there are no frames, ``Switch`` or ``Merge``.
So each function becomes a :class:`Body` — its nodes in one topological order — and
:class:`Evaluator` runs a body the way TensorFlow's executor would, but with JAX values:

* ordinary ops come from the TF1 importer's table (:data:`jta.graph_import._ops.OPS`), which
  computes in numpy where every input is static, so shapes, sizes and trip counts stay known;
* TensorList ops from :mod:`jta.graph_import._lists` (values, not resources);
* ``PartitionedCall``/``StatefulPartitionedCall`` (and ops named after a library function) are
  inlined; ``If``/``StatelessIf``/``Case`` run the branch taken where the predicate is static and
  become ``lax.cond``/``lax.switch`` where it is not; ``While`` goes to
  :mod:`jta.graph_import._tf2_loops`;
* variables are :class:`Var` handles whose values come from ``params``.

The *probe* mode runs a body where some values are :data:`UNKNOWN` (only the static part is
computed): the loops use it to find trip counts and bounds without running anything traced.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .._core import capacities
from .._records.catalogue import Error
from . import _folding, _list_vectors, _lists, _no_gradient, _ops_checks, _random_kernels
from ._branches import lists_agree
from ._custom_gradients import INPUT, Gradient, identity_with_gradient
from ._messages import GraphError
from ._nodes import Node, Tensor, parse, tensor_name
from ._ops import OPS, is_static, learned_size, rejected_as_invalid, run_op
from ._optionals import Opt, agreed, as_jax, fill_optionals, static_leaves
from ._padding import PaddedStacks
from ._random_kernels import KERNEL_OPS, key_of, relative_key

__all__ = ["Body", "Evaluator", "Library", "UNKNOWN", "Var", "CONTROL_OPS"]


class _Unknown:
    """A value the probe does not know (it depends on the inputs' values)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


@dataclasses.dataclass(frozen=True)
class Bounded:
    """To the probe: a value it does not know but that is at most ``bound`` (the step count of a loop
    whose trip count the data decides under a static bound): a gradient loop that runs that many steps
    (``Less(counter, forward_count)``) is then bounded too."""

    bound: int


@dataclasses.dataclass(frozen=True)
class Var:
    """A captured variable's resource handle: its value is ``params[name]``."""

    name: str


OPTIONAL_OPS = ("OptionalFromValue", "OptionalNone", "OptionalGetValue", "OptionalHasValue")
CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
IF_OPS = ("If", "StatelessIf")
CASE_OPS = ("Case", "StatelessCase")
WHILE_OPS = ("While", "StatelessWhile")
VAR_OPS = ("ReadVariableOp", "VariableShape", "ResourceGather", "ResourceGatherNd")
ASSIGN_OPS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "RngReadAndSkip")
PASS_OPS = ("Identity", "IdentityN", "NoOp", "Placeholder", "StopGradient", "PreventGradient",
            "EnsureShape")
CONTROL_OPS = (*CALL_OPS, *IF_OPS, *CASE_OPS, *WHILE_OPS, *VAR_OPS, *ASSIGN_OPS, *PASS_OPS, *OPTIONAL_OPS)


@dataclasses.dataclass
class Body:
    """One function: its nodes, argument placeholders (in order) and output tensors."""

    name: str
    nodes: dict[str, Node]
    inputs: list[str]
    outputs: list[Tensor]
    control: list[str] = dataclasses.field(default_factory=list)  # the nodes that run for their effects
    order: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        # (a function's control outputs run though no output needs them: the assignments of a cond's
        # branch that returns nothing, an optimizer's update under a loss scale's cond)
        self.order = _topological(self.nodes, [*self.outputs, *((n, 0) for n in self.control)])

    def passthrough(self, k: int) -> Optional[int]:
        """The argument output ``k`` returns unchanged (through ``Identity``), or None."""
        node, index = self.outputs[k]
        while node in self.nodes and self.nodes[node].op in ("Identity",) and index == 0:
            node, index = self.nodes[node].inputs[0]
        return self.inputs.index(node) if node in self.inputs and index == 0 else None

    def reads(self, outputs: list[int]) -> set[int]:
        """The arguments outputs ``outputs`` depend on (through data and control edges; a call's every
        input counts)."""
        seen: set[str] = set()
        stack = [self.outputs[k][0] for k in outputs]
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                if name in self.nodes:
                    stack.extend((*self.nodes[name].control, *(t[0] for t in self.nodes[name].inputs)))
        return {k for k, name in enumerate(self.inputs) if name in seen}


def _topological(nodes: dict[str, Node], outputs: list[Tensor]) -> list[str]:
    """The nodes the outputs reach (data and control edges), producers first."""
    order: list[str] = []
    state: dict[str, int] = {}
    for root in [t[0] for t in outputs]:
        stack = [(root, False)]
        while stack:
            name, done = stack.pop()
            if done:
                state[name] = 2
                order.append(name)
                continue
            if name in state or name not in nodes:
                continue
            state[name] = 1
            stack.append((name, True))
            node = nodes[name]
            stack.extend((n, False) for n in (*node.control, *(t[0] for t in node.inputs)) if n not in state)
    return order


class Library:
    """The graph's function library, each function converted to a :class:`Body` when first reached."""

    def __init__(self, library: Any):
        self.fdefs = {f.signature.name: f for f in library.function}
        self.bodies: dict[str, Body] = {}
        self.assignments: dict[str, Optional[set[int]]] = {}
        self.generators: dict[str, dict[str, Node]] = {}
        self.op_types: dict[str, frozenset[str]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.fdefs

    def body(self, name: str) -> Body:
        if name not in self.bodies:
            fdef = self.fdefs[name]
            calls = any(node.op in self.fdefs for node in fdef.node_def)
            self.bodies[name] = _convert(fdef, self.fdefs.values() if calls else ())
        return self.bodies[name]

    def assigned(self, name: str) -> Optional[set[int]]:
        """:func:`assigned_in` of function ``name``, found once (every trace of a loop or a cond asks)."""
        if name not in self.assignments:
            self.assignments[name] = assigned_in(self, self.body(name))
        return self.assignments[name]

    def kernels(self, name: str) -> dict[str, Node]:
        """:meth:`kernels_in` function ``name``, found once."""
        if name not in self.generators:
            self.generators[name] = self.kernels_in(self.body(name))
        return self.generators[name]

    def ops(self, name: str) -> frozenset[str]:
        """The op types function ``name`` runs, itself or through the functions it reaches, found once."""
        if name not in self.op_types:
            self.op_types[name] = frozenset(b.nodes[n].op for b in reached(self, self.body(name)) for n in b.order)
        return self.op_types[name]

    def kernels_in(self, body: Body) -> dict[str, Node]:
        """The stateful random kernels ``body`` runs, itself or through its call ops, by their keys
        relative to it (:func:`._random_kernels.key_of`): their generators are state, as assigned
        variables are."""
        found = {relative_key(body.name, body.nodes[n]): body.nodes[n] for n in body.order
                 if body.nodes[n].op in KERNEL_OPS}
        for n in body.order:
            for inner in called(body.nodes[n], self):
                found.update({f"{n}/{k}": node for k, node in self.kernels(inner).items()})
        return found


def _convert(fdef: Any, library: Any = ()) -> Body:
    """``fdef`` as a :class:`Body`; ``library``: the functions its nodes name as their op type (a
    legacy ``Defun`` call, as ``tf.nn.ctc_loss`` makes), which TensorFlow's conversion looks up
    in the default graph."""
    import tensorflow as tf
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

    if library:
        holder = tf.compat.v1.GraphDef()
        holder.library.function.extend(library)
        with tf.Graph().as_default():
            tf.graph_util.import_graph_def(holder, name="")
            return _convert(fdef)
    graph_def, flat = function_def_to_graph_def(fdef)
    nodes = parse(graph_def, tf)
    inputs = [a.name for a in fdef.signature.input_arg]
    outputs = [tensor_name(flat.get(fdef.ret[a.name], fdef.ret[a.name])) for a in fdef.signature.output_arg]
    control = [fdef.control_ret[c] for c in fdef.signature.control_output if c in fdef.control_ret]
    return Body(fdef.signature.name, nodes, inputs, outputs, control)


def reached(lib: Library, top: Body) -> list[Body]:
    """``top`` and every library function its nodes reach, each once."""
    seen, todo, out = set(), [top], []
    while todo:
        body = todo.pop()
        out.append(body)
        for n in body.order:
            for name in called(body.nodes[n], lib):
                if name not in seen:
                    seen.add(name)
                    todo.append(lib.body(name))
    return out


def assigned_in(lib: Library, body: Body) -> Optional[set[int]]:
    """The arguments of ``body`` (variable handles) that it, or a function it calls, assigns to; None
    where an assignment's handle is not one of them."""
    found: set[int] = set()
    for n in body.order:
        node = body.nodes[n]
        if node.op in ASSIGN_OPS:
            handles = [node.inputs[0]]
        else:
            handles = []
            for name in called(node, lib):
                inner = lib.assigned(name)
                if inner is None:
                    return None
                skip = 1 if node.op in IF_OPS or node.op in CASE_OPS else 0  # (the predicate, the branch index)
                handles += [node.inputs[skip + k] for k in inner]
        for tensor in handles:
            while tensor[0] in body.nodes and body.nodes[tensor[0]].op == "Identity":
                tensor = body.nodes[tensor[0]].inputs[0]
            if tensor[0] not in body.inputs:
                return None
            found.add(body.inputs.index(tensor[0]))
    return found


def called(node: Node, lib: Library) -> list[str]:
    """The library functions ``node`` calls."""
    if node.op in lib:
        return [node.op]
    names = []
    for key in ("f", "then_branch", "else_branch", "cond", "body", "branches"):
        v = node.attr(key)
        for name in (v if isinstance(v, list) else [v]):
            if isinstance(name, str) and name in lib:
                names.append(name)
    return names


def concrete(v: Any) -> Any:
    """``v`` as numpy when it is a concrete (not traced) JAX scalar: a predicate or a count fed to an
    eager call is then static, as it is to TensorFlow (the branch not taken is never run)."""
    if isinstance(v, jax.Array) and not isinstance(v, Tracer) and v.ndim == 0:
        return np.asarray(v)
    return v


def _stopped(value: Any) -> Any:
    """``tf.stop_gradient`` of a traced value (what is known while tracing has no derivative)."""
    return jax.lax.stop_gradient(value) if isinstance(value, (jax.Array, Tracer)) else value


class Evaluator:
    """Runs bodies on JAX values; one instance per call of the imported function."""

    def __init__(self, lib: Library, params: dict[str, Any], loop: Callable[..., Optional[list[Any]]],
                 probe: bool = False, pad_stacks: bool = False, handles: Optional[dict[int, Var]] = None):
        # ``loop(evaluator, node, args)`` runs a While (jta.graph_import._tf2_loops.run, which imports this module)
        self.lib, self.params, self.loop, self.probe, self.pad_stacks = lib, params, loop, probe, pad_stacks
        self.padding = PaddedStacks() if pad_stacks and not probe else None  # (the padded stacks' uses)
        self.leaves = dict(params)  # the variables' values the call was given (what jax.grad differentiates)
        self.bounds: dict[int, tuple[Any, int]] = {}  # id(traced count) -> (the count, its static bound)
        self.carry_depth = 0  # how many loop bodies on their prepared carry are running (see _tf2_loops)
        self.unrolls: list[bool] = []  # the loops running, innermost last: whether each can be unrolled
        self.envs: list[dict[Tensor, Any]] = []  # the values of the bodies running, innermost last
        self.computing: set[tuple[int, Tensor]] = set()  # tensors _forward_value is computing now
        self.bodies: list[Body] = []  # and those bodies
        self.handles = handles or {}  # the captured variables by the id of their eager handles
        self.branches: list[tuple[int, int]] = []  # the lax.switch branches running: (index, branch count)
        self.looping = 0  # how many loops' bodies are running (a variable is assigned outside them only)
        self.assigned: set[str] = set()  # the variables this call assigned (their new values: self.params)
        self.carried: set[str] = set()  # the variables the loops running carry (assigned in their bodies)
        self.taken: dict[int, tuple[Any, int]] = {}  # id(predicate) -> (it, the branch jta.checked learned)
        # The call ops running (a While, an If, a PartitionedCall), outermost first: the path that keys a
        # kernel's state (a generator's) and a loop's plan rows. capacities.at_site keeps the trace's sites,
        # those and the steps of an unrolled loop, for the sizes learned at each.
        self.sites: list[str] = []
        # the lists a run-time branch gave, and those made from them (what a loop's growth probe asks)
        self.switched: Optional[set[int]] = None

    def call(self, body: Body, args: list[Any]) -> list[Any]:
        env: dict[Tensor, Any] = {}
        unknown: set[str] = set()
        for name, value in zip(body.inputs, args, strict=True):
            env[(name, 0)] = value
        self.envs.append(env)
        self.bodies.append(body)
        try:
            for n in body.order:
                node = body.nodes[n]
                if n in body.inputs:
                    continue
                ins = [UNKNOWN if t[0] in unknown else env[t] for t in node.inputs]
                outs = self.node(node, ins)
                if outs is None:
                    unknown.add(n)
                    continue
                for k, v in enumerate(outs):
                    env[(n, k)] = v
        finally:
            self.envs.pop()
            self.bodies.pop()
        outs = [UNKNOWN if t[0] in unknown else env[t] for t in body.outputs]
        if self.padding is not None:
            self.padding.leaving(outs, self.sites[-1] if self.sites else body.name)
        return outs

    def _forward_value(self, tensor: Any, graph: Optional[str] = None) -> Any:
        """A tensor of a body running, computed now if its outputs did not need it (a custom gradient
        reads values the forward does not); ``None`` where it cannot be. ``graph``: the name of the
        TensorFlow graph it is in, which names the body (a loop body's ``while_body_27``, a called
        function's ``__inference_f_12`` for ``f``, or its ``__forward_f_12`` that outputs what a gradient
        needs); else the innermost body that has it, or the function imported. (``tensor`` may be
        ``(INPUT, k, tensor)``: the graph's input ``k``.)"""
        # (a tape's gradient rewrites a loop body in place, "_rewritten": its inputs first as they were)
        graph = None if graph is None else graph.removesuffix("_rewritten")
        named = [] if graph is None else [k for k, b in enumerate(self.bodies) if re.fullmatch(
            rf"{re.escape(graph)}|__(?:inference|forward)_{re.escape(graph)}_\d+", b.name.removesuffix("_rewritten"))]
        at = named[-1] if named else len(self.bodies) - 1
        if tensor[0] == INPUT:  # (a graph's input k: the body named so has it by position, others by name)
            if named:
                return self.envs[at].get((self.bodies[at].inputs[tensor[1]], 0))
            tensor = tensor[2]
        if named and tensor[0] not in self.bodies[at].nodes and f"{tensor[0]}_0" in self.bodies[at].nodes:
            # (a __forward_ function outputs the tensor under the node's name: the node is renamed "_0")
            tensor = (f"{tensor[0]}_0", tensor[1])
        if not named and tensor not in self.envs[at] and tensor[0] not in self.bodies[at].nodes:
            at = 0
        env, body = self.envs[at], self.bodies[at]
        if tensor in env or tensor[0] not in body.nodes:
            return env.get(tensor)
        if (id(env), tensor) in self.computing:  # (it needs itself: a custom gradient's node that reads
            return None                          # a tensor computed after it, as the ops it wraps are)
        self.computing.add((id(env), tensor))
        try:
            return self._computed(tensor, env, body)
        finally:
            self.computing.discard((id(env), tensor))

    def _computed(self, tensor: Tensor, env: dict[Tensor, Any], body: Body) -> Any:
        """``tensor`` of ``body``, computed in ``env`` from the values there (``None`` where it cannot)."""
        for n in _topological(body.nodes, [tensor]):
            if (n, 0) in env or n in body.inputs:
                continue
            node = body.nodes[n]
            if any(t not in env for t in node.inputs):
                return None
            outs = self.node(node, [env[t] for t in node.inputs])
            if outs is None:
                return None
            for k, v in enumerate(outs):
                env[(n, k)] = v
        return env.get(tensor)

    def _gradient(self, gradient: Gradient, values: list[Any], variables: dict[Any, Any]) -> list[Any]:
        """A ``tf.custom_gradient``'s traced gradient graph on ``values`` (cotangents, captures), its
        captured variables' handles reading ``variables`` (their values kept from the forward)."""
        outputs = [t for t in gradient.outputs if t is not None]
        body = Body("<custom gradient>", gradient.nodes, gradient.inputs, outputs)
        params = {**self.params, **{v.name: value for v, value in variables.items()}}
        return Evaluator(Library(gradient.library), params, self.loop, pad_stacks=self.pad_stacks,
                         handles=self.handles).call(body, values)

    def node(self, node: Node, args: list[Any]) -> Optional[list[Any]]:
        """The node's outputs (None: all unknown to the probe)."""
        if self.padding is None:
            return self._node(node, args)
        return self.padding.follow(node, args, self._node, inlined=self._inlined(node))

    def _inlined(self, node: Node) -> bool:
        """Whether ``node`` runs functions on the very values given (a call; a cond's branches, which close
        over them, under ``lax.switch`` too), where a loop makes new values of its carry."""
        op = node.op
        return op in CALL_OPS or op in self.lib or op in IF_OPS or op in CASE_OPS

    def _crossing(self, node: Node, args: list[Any]) -> bool:
        """Whether ``lax`` makes new values of the outputs of ``node``'s functions (a loop's, a run-time
        branch's), where a padded value may not leave."""
        op = node.op
        return op in WHILE_OPS or (op in IF_OPS or op in CASE_OPS) and not is_static(concrete(args[0]))

    def _node(self, node: Node, args: list[Any]) -> Optional[list[Any]]:
        op = node.op
        if op == "StopGradient" and not self.probe:  # (TF2 writes back_prop=False and stop_recording so too)
            return [jax.tree_util.tree_map(_stopped, args[0])]
        if op in ("Identity", "StopGradient", "PreventGradient", "EnsureShape", "Snapshot"):
            if op == "EnsureShape" and not self.probe:
                _ops_checks.ensure_shape(node, args[0])
            return [args[0]]
        if op == "IdentityN":
            kind = node.attr("_gradient_op_type") if not self.probe else None
            if not kind:
                return list(args)
            kind = kind.decode() if isinstance(kind, bytes) else str(kind)
            return identity_with_gradient(node, kind, args, self._forward_value, self._gradient,
                                          (Var, lambda v: self.params[v.name], self.handles))
        if op == "NoOp":
            return []
        if op == "OptionalNone":
            return [Opt(None, False)]
        if op == "OptionalFromValue":
            return [Opt(tuple(args), True)]
        if op in CALL_OPS or op in self.lib or op in IF_OPS or op in CASE_OPS or op in WHILE_OPS:
            self.sites.append(node.name)  # (the call op whose functions run: it owns their kernels)
            self.looping += op in WHILE_OPS
            if self.padding is not None:  # (lax remakes a loop's carry, a run-time branch's outputs)
                self.padding.crossing.append(self._crossing(node, args))
            with capacities.at_site(node.name):
                try:
                    if op in IF_OPS or op in CASE_OPS:
                        return self._branch(node, args)
                    if op in WHILE_OPS:
                        return self.loop(self, node, args)
                    return self.call(self.lib.body(node.attr("f") if op in CALL_OPS else op), args)
                finally:
                    self.sites.pop()
                    self.looping -= op in WHILE_OPS
                    if self.padding is not None:
                        self.padding.crossing.pop()
        if op in KERNEL_OPS:
            return None if self.probe else self._draw(node, args)
        if op == "PrintV2" and self.probe:  # (a probe runs the ops of constants to count a loop's steps)
            return []
        if self.probe:
            unknown = [a is UNKNOWN or isinstance(a, _lists.TList) or
                       (not is_static(a) and not isinstance(a, Var)) for a in args]
            if op in ("Less", "LessEqual") and isinstance(args[1], Bounded) and is_static(args[0]):
                beyond = int(args[0]) >= args[1].bound + (op == "LessEqual")
                return [np.bool_(False)] if beyond else None
            if op in ("LogicalAnd", "LogicalOr") and any(unknown):
                absorbing = op == "LogicalOr"
                if any(is_static(a) and np.shape(a) == () and bool(a) is absorbing for a in args):
                    return [np.bool_(absorbing)]
            if op == "Minimum" and any(unknown):
                bound = _static_bound(args)
                return None if bound is None else [Bounded(bound)]
            if any(unknown) and not (op in ("Shape", "Size", "Rank", "ShapeN") and
                                     not any(a is UNKNOWN or isinstance(a, Bounded) for a in args)):
                return None
        if op in VAR_OPS:
            return self._variable(node, args)
        if op in ASSIGN_OPS:
            return self._assign(node, args)
        if op == "OptionalHasValue":
            return [np.bool_(args[0].has) if isinstance(args[0].has, bool) else args[0].has]
        if op == "OptionalGetValue":
            return args[0].read(node, self.branches[-1] if self.branches else None)
        if op in _lists.LIST_OPS:
            if op in ("TensorListStack", "TensorListConcat", "TensorListConcatV2") and not args[0].static \
                    and not self.pad_stacks:
                # TensorFlow's shape: the length jta.checked learned (it compiles again when it differs)
                rows = None if args[0].parts is not None else capacities.learned_rows(
                    args[0].length, node.name, message=Error.RESULT_SIZE_LEARNED,  # (not a TensorArray's text)
                    most=_lists.rows(args[0].items) or args[0].rows_hint, key=id(node))
                if rows is None:
                    GraphError.PADDED_STACK.raise_(node=node.name, op=op)
                return _lists.exact_rows(node, args, rows)
            if op == "TensorListReserve" and id(args[1]) in self.bounds:  # a run-time size under a static bound
                return _lists.reserve_bounded(node, args, self.bounds[id(args[1])][1])
            if op == "TensorListPushBack" and id(args[1]) in self.bounds:  # a tape keeps a bounded count
                return _lists.push_bounded(node, args, self.bounds[id(args[1])][1])
            with rejected_as_invalid(node):  # (as every op: what its JAX code rejects is TensorFlow's bad input)
                out = _folding.folded_lists(_lists.LIST_OPS[op], node, args) or _lists.LIST_OPS[op](node, args)
            if self.switched is not None and any(id(a) in self.switched for a in args):
                self.switched.update(id(o) for o in out if isinstance(o, _lists.TList))
            if op == "TensorListPopBack" and isinstance(args[0].const, _lists.AtMost) and isinstance(out[1], Tracer):
                self.bounds[id(out[1])] = (out[1], args[0].const.bound)  # popped from a tape: under its bound
            elif op == "TensorListLength" and isinstance(out[0], Tracer):
                rows = _lists.length_bound(args[0])
                if rows is not None:  # a run-time length under a static bound (its buffer's rows)
                    self.bounds[id(out[0])] = (out[0], rows)
            return out
        if op == "Unpack" and isinstance(args[0], _list_vectors.ListBatch):
            return list(args[0].lists)
        if any(isinstance(a, _lists.TList) for a in args):
            if op == "Pack":  # a vector of lists (TensorListPushBackBatch, TensorListConcatLists take one)
                return [_list_vectors.ListBatch(tuple(args))]
            if op == "ZerosLike":
                return [_lists.zeros_like(args[0])]
            if op == "AddN":
                return [_lists.add_n(node, args)]
        out = run_op(node, args)
        if op == "Minimum":  # min(n, c) with n only known at run time: at most c (a loop's bound, a list's size)
            bound = _static_bound([self.bounds[id(a)][1] if id(a) in self.bounds else a for a in args])
            if bound is not None and isinstance(out[0], Tracer):
                self.bounds[id(out[0])] = (out[0], bound)
        return out

    def _variable(self, node: Node, args: list[Any]) -> list[Any]:
        var = args[0]
        if var.name not in self.params:
            GraphError.TF2_PARAMS.raise_(name=var.name, known=", ".join(sorted(self.params)) or "nothing")
        value = self.params[var.name]
        if node.op == "VariableShape":
            return [np.asarray(np.shape(value), node.attr("out_type", np.dtype("int32")))]
        value = jnp.asarray(value, jax.dtypes.canonicalize_dtype(node.attr("dtype")))
        if node.op == "ReadVariableOp":
            return [value]
        if node.op == "ResourceGatherNd":  # GatherNd's kernel on the value: its checks, its scatter_nd gradient
            return OPS["GatherNd"](node, [value, args[1]])
        _ops_checks.gather(node, args[1], np.shape(value)[0])
        return [jnp.take(value, jnp.asarray(args[1]), axis=0)]

    def _assign(self, node: Node, args: list[Any]) -> Optional[list[Any]]:
        """``AssignVariableOp`` (``Add``, ``Sub``): the variable's new value, which the reads after it in
        this call see (TensorFlow orders them by control edges); :func:`jta.import_function` returns it
        with ``with_updates=True``. Inside a loop's body or a run-time cond's branch it would be a value of
        that branch: refused. (A loop carries the variables its body assigns: :func:`assigned_in`.)
        ``RngReadAndSkip`` (a ``tf.random.Generator``'s draw) outputs its state and assigns it stepped."""
        if self.probe:
            return None if node.op == "RngReadAndSkip" else []
        var = args[0]
        if (self.branches or self.looping) and var.name not in self.carried:
            GraphError.TF2_UNSUPPORTED.raise_(items=(
                f"  - node {node.name} ({node.op}): a variable assigned inside a run-time cond's branch, or in a "
                "loop through a handle it does not take as a loop variable: return the new value from the cond, "
                "and assign it after"))
        old = jnp.asarray(self.params[var.name])
        if node.op == "RngReadAndSkip":  # (a tf.random.Generator's draw: its state, which it steps)
            new, out = _random_kernels.read_and_skip(node, old, *args[1:]), [old]
        else:
            value, out = jnp.asarray(args[1], old.dtype), []
            new = {"AssignVariableOp": value, "AssignAddVariableOp": old + value,
                   "AssignSubVariableOp": old - value}[node.op]
        # TensorFlow's tape differentiates no assignment: a read after one is a read of the variable (its
        # gradient is the variable's, summed over its reads), so the value is the variable's to jax.grad
        leaf, fixed = jnp.asarray(self.leaves[var.name]), jax.lax.stop_gradient
        zero = jnp.where(jnp.isfinite(leaf), leaf - fixed(leaf), 0) if jnp.issubdtype(leaf.dtype, jnp.inexact) else 0
        self.params[var.name] = fixed(new) + jnp.asarray(zero, old.dtype) if leaf.shape == new.shape else fixed(new)
        self.assigned.add(var.name)
        return out

    def _draw(self, node: Node, args: list[Any]) -> list[Any]:
        """A stateful random op: values from its kernel's generator in ``params``, which it steps."""
        key = key_of(self.sites, relative_key(self.bodies[-1].name, node))
        if key not in self.params:
            GraphError.TF2_PARAMS.raise_(name=key, known=", ".join(sorted(self.params)) or "nothing")
        out, self.params[key] = KERNEL_OPS[node.op](node, _no_gradient.guard(node.op, args), self.params[key])
        self.assigned.add(key)
        return out

    def _branch(self, node: Node, args: list[Any]) -> Optional[list[Any]]:
        """``If``/``Case``: the branch taken where the predicate is static, else ``lax.cond``/``lax.switch``."""
        pred, rest = concrete(args[0]), args[1:]
        names = node.attr("branches") if node.op in CASE_OPS else [node.attr("else_branch"), node.attr("then_branch")]
        bodies = [self.lib.body(n) for n in names]
        if is_static(pred):
            if node.op in CASE_OPS:
                k = int(pred)
                k = k if 0 <= k < len(bodies) else len(bodies) - 1  # TF runs the last branch out of range
            else:
                k = int(bool(np.any(pred) if np.ndim(pred) == 0 else np.size(pred) > 0))
            return self.call(bodies[k], rest)
        if self.probe:
            return None
        seen = self.taken.get(id(args[0]))
        if seen is not None and seen[0] is args[0]:  # (a gradient's cond of a cond whose branch was learned:
            return self.call(bodies[seen[1]], rest)  # the same predicate takes the same branch)
        if node.op in CASE_OPS:
            n = len(bodies)
            index = jnp.asarray(pred, jnp.int32)
            index = jnp.where((index < 0) | (index >= n), n - 1, index)
        else:
            # TF's If: a scalar is true where nonzero; a non-scalar where it is not empty (a static fact)
            index = (jnp.asarray(pred) != 0).astype(jnp.int32) if jnp.ndim(pred) == 0 else \
                jnp.int32(jnp.size(pred) > 0)
        found = [self.lib.assigned(n) for n in names]  # (the variables a branch assigns are its outputs too)
        handles = [rest[k] for f in found if f is not None for k in f if isinstance(rest[k], Var)]
        start = {} if None in found else {v.name: jnp.asarray(self.params[v.name]) for v in handles}
        kernels = sorted(key_of(self.sites, k) for n in names for k in self.lib.kernels(n))
        start.update({k: jnp.asarray(self.params[k]) for k in kernels if k in self.params})
        facts: list[Any] = [None] * len(bodies)  # per branch: its static outputs, the lists it passes on
        fns = [lambda b=b, k=k: self._in_branch(k, len(bodies), b, rest, start, facts) for k, b in enumerate(bodies)]
        if any(b.nodes[n].op in ("OptionalNone", "OptionalFromValue") for b in bodies for n in b.order):
            fns = fill_optionals(fns)  # (TF may put values of different shapes in one slot: a union)
        fns = lists_agree(fns)
        try:
            outs = list(jax.lax.switch(index, fns))
            if self.switched is not None:  # (a list one branch grows and another passes on)
                kept = [passed for _, passed in facts]
                self.switched.update(id(outs[j]) for j in set.union(*kept) - set.intersection(*kept))
            self.params.update(zip(start, outs[len(outs) - len(start):], strict=True))
            self.assigned.update(start)
            return agreed(outs[:len(outs) - len(start)], [statics for statics, _ in facts])
        except TypeError as error:  # the branches' outputs differ in structure, shape or dtype
            self.params.update(start)
            if not capacities.active():
                raise GraphError.TF2_BRANCH.exception(node=node.name, op=node.op, error=str(error)[:500]) from error
        # under jta.checked: the branch taken is learned at run time, as a size the data decides is (one
        # compilation per branch): TensorFlow's outputs have the shapes the branch taken gives
        k = learned_size(node, index, "the predicate (its branches' outputs differ in shape; jta.checked learns "
                                      "which runs)", 0)
        self.taken[id(args[0])] = (args[0], k)
        return self.call(bodies[k], rest)

    def _in_branch(self, k: int, count: int, body: Body, args: list[Any], start: dict[str, Any],
                   facts: list[Any]) -> list[Any]:
        """Branch ``k`` of ``count`` of a ``lax.switch`` (the optionals it reads know which it is), from the
        variables' values ``start``, which it outputs after its own; ``facts[k]``: its static outputs
        (:func:`static_leaves`) and the outputs that are lists of ``args`` it passes on as they came."""
        self.branches.append((k, count))
        added = set(start) - self.carried
        self.params.update(start)
        self.carried |= added
        try:
            outs = self.call(body, args)
            lengths = {id(a.length) for a in args if isinstance(a, _lists.TList)}
            facts[k] = (static_leaves(outs), {j for j, o in enumerate(outs)
                                              if isinstance(o, _lists.TList) and id(o.length) in lengths})
            return as_jax(outs) + [jnp.asarray(self.params[n], v.dtype) for n, v in start.items()]
        finally:
            self.branches.pop()
            self.carried -= added


def _static_bound(args: list[Any]) -> Optional[int]:
    """The least static integer scalar among a ``Minimum``'s operands (a ``Bounded``'s bound counts)."""
    known = [a.bound if isinstance(a, Bounded) else int(a) for a in args
             if isinstance(a, (Bounded, int)) or (is_static(a) and np.ndim(a) == 0 and
                                                  np.issubdtype(np.asarray(a).dtype, np.integer))]
    return min(known) if known and min(known) >= 0 else None

"""What the importer refuses before it runs anything, with the way out for each kind of refusal.

:func:`check` walks the nodes the outputs need once and raises one ``UnimplementedError`` listing
every unsupported op type (with up to three of its nodes) and every construct the graph parser
flagged, followed by one line per kind of refusal that says what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable

from ._frames import Graph
from ._messages import GraphError

_V2_CONTROL_FLOW = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
                              "PartitionedCall", "StatefulPartitionedCall"})
_VARIABLES = frozenset({"VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "AssignVariableOp",
                        "AssignAddVariableOp", "AssignSubVariableOp", "Assign", "AssignAdd", "AssignSub",
                        "VarIsInitializedOp", "IsVariableInitialized", "ResourceGather", "ResourceGatherNd"})
_RANDOM_PREFIXES = ("Random", "StatelessRandom", "StatelessTruncated", "StatelessMultinomial", "TruncatedNormal",
                    "Multinomial", "ParameterizedTruncatedNormal", "StatefulStandardNormal", "StatefulUniform",
                    "RngBitGenerator", "XlaRngBitGenerator", "UniformCandidateSampler", "LogUniformCandidateSampler",
                    "FixedUnigramCandidateSampler", "AllCandidateSampler", "LearnedUnigramCandidateSampler")

# (what the kind is, does an op type belong to it, what to do), in the order they are reported.
_KINDS: tuple[tuple[str, Callable[[str], bool], str], ...] = (
    ("control flow v2", lambda op: op in _V2_CONTROL_FLOW or "TensorList" in op,
     "the graph uses TF2's functional control flow (bodies in the function library), which "
     "jta.import_graph_def does not run: import a tf.function with jta.import_function(fn, *example_args) "
     "(or a SavedModel with jta.import_saved_model(path)), which run it natively; a TF1 graph can instead "
     "be built after tf.compat.v1.disable_control_flow_v2() (or tf.compat.v1.disable_v2_behavior())."),
    ("variables", lambda op: op in _VARIABLES,
     "freeze the graph first: tf.compat.v1.graph_util.convert_variables_to_constants(session, graph_def, "
     "output_names) makes each variable a constant (or feed their values through placeholders); a "
     "tf.function's variables become jta.import_function's params."),
    ("random numbers", lambda op: op.startswith(_RANDOM_PREFIXES),
     "a stateful random op's stream lives in TensorFlow's op state and cannot be reproduced in JAX: use "
     "the stateless ops with an explicit seed (tf.random.stateless_uniform, ...: imported bit for bit), "
     "feed the random values (a dropout mask, noise, sampled candidates) as inputs through a placeholder, "
     "or build the graph without them (dropout rate 0)."),
)
_OTHER = ("jta.graph_import.supported_ops() lists the op types jta runs; please report a missing one with "
          "the graph.")


def check(graph: Graph, needed: set[str], fed: set[str], known: set[str]) -> None:
    """Raise one ``UnimplementedError`` listing every unsupported op type and construct among ``needed``."""
    unsupported: dict[str, list[str]] = {}
    items = []
    for n in sorted(needed):
        node = graph.nodes[n]
        if node.op not in known:
            unsupported.setdefault(node.op, []).append(n)
        elif node.op == "Placeholder" and n not in fed:
            items.append(f"  - Placeholder {n} is needed but not among the inputs")
    for op, names in sorted(unsupported.items()):
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        items.append(f"  - op type {op} ({len(names)} node{'s' * (len(names) > 1)}: {', '.join(names[:3])}{more})")
    items += [f"  - {issue}" for issue in graph.issues]
    if not items:
        return
    ways_out, rest = [], set(unsupported)
    for kind, belongs, way_out in _KINDS:
        ops = sorted(op for op in rest if belongs(op))
        if ops:
            ways_out.append(f"{kind.capitalize()} ({', '.join(ops)}): {way_out}")
            rest -= set(ops)
    if rest:
        ways_out.append(f"Other op types ({', '.join(sorted(rest))}): {_OTHER}")
    GraphError.UNSUPPORTED.raise_(items="\n".join(items + ways_out))

"""The ops TensorFlow's tape does not differentiate, and what ``jax.grad`` of an import does there.

TensorFlow's gradient registry says one of three things of an op: a gradient function; ``None``
(``ops.NotDifferentiable``: the tape gives no gradient through it, zeros to ``jax.grad``); or nothing
(the tape raises ``LookupError: gradient registry has no entry for: <op>`` when a gradient reaches
the op). JAX differentiates the ``jnp`` code an op is written with, so without this module
``jax.grad`` would give a derivative where TensorFlow gives none (``tf.one_hot``'s ``on_value``,
``tf.range`` of float bounds, ``tf.image.hsv_to_rgb``) or an error (``tf.unique``, an area resize);
and some gradient functions give some operands none (``tf.pad``'s ``constant_values``).
:func:`guard` puts the registry's answer on the op's float inputs: ``stop_gradient``, or an identity
whose cotangent rule raises TensorFlow's ``LookupError``; JAX runs that rule only where a nonzero
cotangent reaches the input, as TensorFlow's tape visits only the ops on a gradient's path.
``tests/test_tf2_gradient_registry.py`` keeps both sets equal to TensorFlow's registry.
"""

from __future__ import annotations

import functools
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
from jax.core import Tracer

# ops.NotDifferentiable in TensorFlow (of the ops in jta's table whose inputs may be floats)
NOT_DIFFERENTIABLE = frozenset({
    "Assert", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BroadcastGradientArgs", "CTCGreedyDecoder",
    "ConcatOffset", "Const",
    "Equal", "Greater", "GreaterEqual", "HSVToRGB", "Invert", "InvertPermutation", "LeftShift", "Less",
    "LessEqual", "LogicalAnd", "LogicalNot", "LogicalOr", "LookupTableFindV2", "LookupTableSizeV2", "Multinomial",
    "NonMaxSuppression",
    "NonMaxSuppressionV2", "NotEqual", "OneHot", "OnesLike", "RaggedRange", "RandomShuffle", "RandomStandardNormal",
    "RandomUniform", "Range", "Rank", "ResizeBilinearGrad", "RightShift", "Shape", "ShapeN", "Size",
    "StatelessMultinomial", "StatelessRandomNormal", "StatelessRandomNormalV2", "StatelessRandomPoisson",
    "StatelessRandomUniform",
    "StatelessRandomUniformFullInt", "StatelessRandomUniformFullIntV2", "StatelessRandomUniformInt",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformV2", "StatelessTruncatedNormal",
    "StatelessTruncatedNormalV2", "StopGradient", "TruncatedNormal", "ZerosLike",
})

# no entry in TensorFlow's registry: a gradient that reaches them raises LookupError
UNREGISTERED = frozenset({
    "AdjustContrastv2", "AdjustHue", "AdjustSaturation", "All", "Any", "Bincount", "Bitcast", "BroadcastArgs",
    "Bucketize", "CombinedNonMaxSuppression", "ControlTrigger", "CropAndResizeGradBoxes", "CropAndResizeGradImage",
    "DenseBincount", "Dilation2DBackpropFilter", "Dilation2DBackpropInput", "Empty", "HistogramFixedWidth",
    "IRFFT3D", "IgammaGradA", "InTopK", "InTopKV2", "InplaceAdd", "InplaceUpdate", "IsFinite", "IsInf", "IsNan",
    "LRNGrad", "ListDiff", "LookupTableImportV2", "LowerBound", "Lu", "MaxPoolGradGradV2", "MaxPoolGradWithArgmax",
    "NoOp",
    "NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5", "PrintV2", "RFFT3D", "RandomGammaGrad",
    "RandomPoisson", "RandomPoissonV2",
    "RandomUniformInt", "ResizeArea", "ResizeBicubicGrad", "ResizeNearestNeighborGrad", "ScaleAndTranslateGrad",
    "Snapshot", "SoftsignGrad", "SparseFillEmptyRowsGrad", "SparseReshape", "SparseSegmentMeanGrad",
    "SparseSegmentMeanGradV2", "SparseSegmentSqrtNGrad", "SparseSegmentSqrtNGradV2", "SparseSegmentSumGrad",
    "SparseSegmentSumGradV2", "StatelessRandomGetAlg", "StatelessRandomGetKeyCounter",
    "StatelessRandomGetKeyCounterAlg", "StatelessShuffle", "StringFormat", "Unique", "UniqueV2", "UniqueWithCounts",
    "UniqueWithCountsV2", "UnravelIndex", "UpperBound", "Where", "XlaDynamicSlice", "XlaDynamicUpdateSlice",
    # tf.summary's writes (._ops_logging: no-ops without outputs)
    "CloseSummaryWriter", "FlushSummaryWriter", "WriteAudioSummary", "WriteGraphSummary", "WriteHistogramSummary",
    "WriteImageSummary", "WriteRawProtoSummary", "WriteScalarSummary", "WriteSummary",
})


# operands whose gradient TensorFlow's registered function returns as None (the others' it computes)
NO_GRADIENT_OPERANDS = {
    "PadV2": (2,),  # constant_values
    "MatrixDiagV2": (4,), "MatrixDiagV3": (4,),  # padding_value
    "MatrixDiagPartV2": (2,), "MatrixDiagPartV3": (2,),
}


def _no_entry(op: str) -> NoReturn:
    raise LookupError(f"gradient registry has no entry for: {op}")


@functools.cache
def _unregistered(op: str) -> Any:
    """The identity whose cotangent rule raises TensorFlow's ``LookupError`` for ``op``."""
    @jax.custom_vjp
    def identity(x: Any) -> Any:
        return x

    identity.defvjp(lambda x: (x, None), lambda _, cotangent: _no_entry(op))
    return identity


def guard(op: str, args: list[Any]) -> list[Any]:
    """``args`` of ``op`` as TensorFlow's registry differentiates them (traced float inputs only: a
    value known while tracing has no derivative, and a concrete one is not being differentiated)."""
    if op not in NOT_DIFFERENTIABLE and op not in UNREGISTERED and op not in NO_GRADIENT_OPERANDS:
        return args
    stop = _unregistered(op) if op in UNREGISTERED else jax.lax.stop_gradient
    which = NO_GRADIENT_OPERANDS.get(op, range(len(args)))
    return [stop(a) if k in which and isinstance(a, Tracer) and jnp.issubdtype(a.dtype, jnp.inexact) else a
            for k, a in enumerate(args)]

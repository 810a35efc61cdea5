"""The fuzz table: one Spec per (op, integer argument). Values: valid first, then negative, just past
the end, far past, wrong lengths, zero where it matters."""

from __future__ import annotations

import numpy as np

from .engine import Spec


def i32(v):
    return np.array(v, np.int32)


def i64(v):
    return np.array(v, np.int64)


X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0          # rank 2, dims 3 and 4
X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.0
XB = X > 0
V1 = np.arange(5, dtype=np.float32) + 1.0
IMG = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
IMG2 = np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2)


def axis_scalars(r):
    return [i32(0), i32(r - 1), i32(-1), i32(-r), i32(r), i32(-r - 1), i32(r + 5)]


def idx_scalars(n):
    return [i32(0), i32(n - 1), i32(-1), i32(n), i32(n + 100), i32(-n - 1)]


def idx_vectors(n):
    return [i32([0, n - 1]), i32([n - 1, 0]), i32([0, -1]), i32([n, 0]), i32([0, n + 100]), i32([-n - 1, 1]),
            i32([2 ** 31 - 1, 0])]


SPECS: list[Spec] = []


def S(name, ops, role, expr, args, fuzz, values, **kw):
    SPECS.append(Spec(name, tuple(ops), role, expr, dict(args), fuzz, list(values), **kw))


# ---------------------------------------------------------------- reductions / axis arguments
for op in ("Sum", "Prod", "Max", "Min", "Mean"):
    S(f"{op}.axis", [op], "axis", f"tf.raw_ops.{op}(input=x, axis=i, keep_dims=False)", {"x": X}, "i",
      axis_scalars(2))
    S(f"{op}.axisvec", [op], "axis", f"tf.raw_ops.{op}(input=x, axis=i, keep_dims=True)", {"x": X}, "i",
      [i32([0, 1]), i32([1, 0]), i32([0, 0]), i32([1, -1]), i32([0, 2]), i32([-3, 0]), i32([0, 1, 0])], dyn=True)
for op in ("All", "Any"):
    S(f"{op}.axis", [op], "axis", f"tf.raw_ops.{op}(input=x, axis=i, keep_dims=False)", {"x": XB}, "i",
      axis_scalars(2))
for op in ("ArgMax", "ArgMin"):
    S(f"{op}.dim", [op], "axis", f"tf.raw_ops.{op}(input=x, dimension=i)", {"x": X}, "i", axis_scalars(2))
for op in ("Cumsum", "Cumprod", "CumulativeLogsumexp"):
    S(f"{op}.axis", [op], "axis", f"tf.raw_ops.{op}(x=x, axis=i)", {"x": X}, "i", axis_scalars(2))
S("ConcatV2.axis", ["ConcatV2"], "axis", "tf.raw_ops.ConcatV2(values=[x, x], axis=i)", {"x": X}, "i", axis_scalars(2))
S("ConcatV2.axis_mismatch", ["ConcatV2"], "axis", "tf.raw_ops.ConcatV2(values=[x, x[:, :2]], axis=i)", {"x": X}, "i",
  [i32(1), i32(-1), i32(0), i32(-2), i32(2)])
S("Concat.dim", ["Concat"], "axis", "tf.raw_ops.Concat(concat_dim=i, values=[x, x])", {"x": X}, "i", axis_scalars(2))
S("ConcatOffset.dim", ["ConcatOffset"], "axis",
  "tf.raw_ops.ConcatOffset(concat_dim=i, shape=[tf.constant([2, 3], tf.int32), tf.constant([2, 5], tf.int32)])",
  {}, "i", [i32(1), i32(-1), i32(0), i32(2), i32(-3)])
S("ExpandDims.dim", ["ExpandDims"], "axis", "tf.raw_ops.ExpandDims(input=x, axis=i)", {"x": X}, "i",
  [i32(0), i32(2), i32(-1), i32(-3), i32(3), i32(-4), i32(9)])
S("Split.dim", ["Split"], "axis", "tf.raw_ops.Split(axis=i, value=x, num_split=2)", {"x": X}, "i",
  [i32(1), i32(-1), i32(0), i32(-2), i32(2), i32(-3)])
S("SplitV.dim", ["SplitV"], "axis", "tf.raw_ops.SplitV(value=x, size_splits=tf.constant([1, 2]), axis=i, num_split=2)",
  {"x": X}, "i", [i32(0), i32(-2), i32(1), i32(2), i32(-3)])
S("SplitV.sizes", ["SplitV"], "size", "tf.raw_ops.SplitV(value=x, size_splits=i, axis=1, num_split=2)", {"x": X}, "i",
  [i32([1, 3]), i32([0, 4]), i32([-1, 1]), i32([3, -1]), i32([-1, -1]), i32([5, -1]), i32([1, 1]), i32([2, 3]),
   i32([-2, 6]), i32([6, -2])])
S("ReverseV2.axis", ["ReverseV2"], "axis", "tf.raw_ops.ReverseV2(tensor=x, axis=i)", {"x": X}, "i",
  [i32([1]), i32([-1]), i32([-2]), i32([2]), i32([-3]), i32([7])])
S("ReverseV2.axis2", ["ReverseV2"], "axis", "tf.raw_ops.ReverseV2(tensor=x, axis=i)", {"x": X}, "i",
  [i32([0, 1]), i32([1, 0]), i32([0, 0]), i32([1, -1]), i32([0, 2])])
S("Roll.axis", ["Roll"], "axis", "tf.raw_ops.Roll(input=x, shift=tf.constant([1]), axis=i)", {"x": X}, "i",
  [i32([0]), i32([1]), i32([-1]), i32([2]), i32([-3]), i32([100])])
S("Roll.shift", ["Roll"], "shift", "tf.raw_ops.Roll(input=x, shift=i, axis=tf.constant([1]))", {"x": X}, "i",
  [i32([1]), i32([0]), i32([-1]), i32([4]), i32([-9]), i32([2 ** 31 - 1]), i32([-2 ** 31])])
S("Roll.lengths", ["Roll"], "shift", "tf.raw_ops.Roll(input=x, shift=i, axis=tf.constant([0, 1]))", {"x": X}, "i",
  [i32([1, 2]), i32([1]), i32([1, 2, 3])], dyn=True)
S("GatherV2.axis", ["GatherV2"], "axis", "tf.raw_ops.GatherV2(params=x, indices=tf.constant([0, 1]), axis=i)",
  {"x": X}, "i", axis_scalars(2))
S("GatherV2.axis_bd", ["GatherV2"], "axis",
  "tf.raw_ops.GatherV2(params=x, indices=tf.constant([[0], [1], [2]]), axis=i, batch_dims=1)", {"x": X}, "i",
  [i32(1), i32(-1), i32(0), i32(2), i32(-3)])

# ---------------------------------------------------------------- indices
S("GatherV2.idx0", ["GatherV2"], "index", "tf.raw_ops.GatherV2(params=x, indices=i, axis=0)", {"x": X}, "i",
  idx_vectors(3))
S("GatherV2.idx1", ["GatherV2"], "index", "tf.raw_ops.GatherV2(params=x, indices=i, axis=1)", {"x": X}, "i",
  idx_vectors(4))
S("GatherV2.idx_scalar", ["GatherV2"], "index", "tf.raw_ops.GatherV2(params=x, indices=i, axis=0)", {"x": X}, "i",
  idx_scalars(3))
S("GatherV2.idx64", ["GatherV2"], "index", "tf.raw_ops.GatherV2(params=x, indices=i, axis=0)", {"x": X}, "i",
  [i64([0, 2]), i64([3, 0]), i64([-1, 0]), i64([2 ** 32, 0]), i64([2 ** 32 + 1, 0])])
S("GatherV2.batch", ["GatherV2"], "index",
  "tf.raw_ops.GatherV2(params=x, indices=i, axis=1, batch_dims=1)", {"x": X}, "i",
  [i32([[0], [1], [3]]), i32([[4], [0], [0]]), i32([[-1], [0], [0]])])
S("Gather.idx", ["Gather"], "index", "tf.raw_ops.Gather(params=x, indices=i)", {"x": X}, "i", idx_vectors(3))
S("ResourceGather.idx", ["ResourceGather"], "index",
  "tf.gather(v, i)", {}, "i", idx_vectors(3),
  setup="v = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4), name='v')")
S("GatherNd.idx", ["GatherNd"], "index", "tf.raw_ops.GatherNd(params=x, indices=i)", {"x": X}, "i",
  [i32([[0, 1], [2, 3]]), i32([[2, 4], [0, 0]]), i32([[3, 0], [0, 0]]), i32([[-1, 0], [0, 0]]),
   i32([[0, 100], [0, 0]])])
S("GatherNd.slice", ["GatherNd"], "index", "tf.raw_ops.GatherNd(params=x, indices=i)", {"x": X}, "i",
  [i32([[1]]), i32([[3]]), i32([[-1]]), i32([[9]])])
S("GatherNd.long", ["GatherNd"], "index", "tf.raw_ops.GatherNd(params=x, indices=i)", {"x": X}, "i",
  [i32([[0, 1, 0]]), i32([[0, 0, 0]])])
S("ScatterNd.idx", ["ScatterNd"], "index",
  "tf.raw_ops.ScatterNd(indices=i, updates=tf.constant([1., 2.]), shape=tf.constant([3, 4]))", {}, "i",
  [i32([[0, 1], [2, 3]]), i32([[0, 1], [0, 1]]), i32([[3, 0], [0, 0]]), i32([[0, 4], [0, 0]]),
   i32([[-1, 0], [0, 0]]), i32([[0, 99], [0, 0]])])
S("ScatterNd.shape", ["ScatterNd"], "shape",
  "tf.raw_ops.ScatterNd(indices=tf.constant([[0, 1], [2, 3]]), updates=tf.constant([1., 2.]), shape=i)", {}, "i",
  [i32([3, 4]), i32([4, 5]), i32([2, 4]), i32([3, 3]), i32([3, -4]), i32([0, 4]), i32([-1, -1])])
for op in ("TensorScatterUpdate", "TensorScatterAdd"):
    S(f"{op}.idx", [op], "index", f"tf.raw_ops.{op}(tensor=x, indices=i, updates=x[:2])", {"x": X}, "i",
      [i32([[0], [2]]), i32([[1], [1]]), i32([[0], [3]]), i32([[-1], [0]]), i32([[0], [50]])])
    S(f"{op}.idx2", [op], "index", f"tf.raw_ops.{op}(tensor=x, indices=i, updates=tf.constant([7., 8.]))",
      {"x": X}, "i", [i32([[0, 0], [2, 3]]), i32([[0, 4], [0, 0]]), i32([[0, -1], [0, 0]])])
for op in ("InplaceAdd", "InplaceUpdate"):
    S(f"{op}.i", [op], "index", f"tf.raw_ops.{op}(x=x, i=i, v=x[:2] * 0 + 100.)", {"x": X}, "i",
      [i32([0, 2]), i32([1, 1]), i32([0, 3]), i32([-1, 0]), i32([0, 99])])
S("DynamicStitch.idx", ["DynamicStitch"], "index",
  "tf.raw_ops.DynamicStitch(indices=[i, tf.constant([2])], data=[x[:2], x[2:]])", {"x": X}, "i",
  [i32([0, 1]), i32([1, 0]), i32([0, 0]), i32([0, 3]), i32([-1, 1]), i32([0, 9])])
S("ParallelDynamicStitch.idx", ["ParallelDynamicStitch"], "index",
  "tf.raw_ops.ParallelDynamicStitch(indices=[i, tf.constant([2])], data=[x[:2], x[2:]])", {"x": X}, "i",
  [i32([0, 1]), i32([1, 0]), i32([0, 3]), i32([-1, 1])])
S("DynamicPartition.parts", ["DynamicPartition"], "index",
  "tf.raw_ops.DynamicPartition(data=x, partitions=i, num_partitions=2)", {"x": X}, "i",
  [i32([0, 1, 0]), i32([1, 1, 1]), i32([0, 2, 1]), i32([-1, 0, 1]), i32([0, 0, 9])])
S("OneHot.idx", ["OneHot"], "index",
  "tf.raw_ops.OneHot(indices=i, depth=3, on_value=tf.constant(1.), off_value=tf.constant(0.))", {}, "i",
  [i32([0, 2]), i32([-1, 3]), i32([5, 0]), i32([2 ** 31 - 1, -2 ** 31])])
S("OneHot.depth", ["OneHot"], "size",
  "tf.raw_ops.OneHot(indices=tf.constant([0, 2]), depth=i, on_value=tf.constant(1.), off_value=tf.constant(0.))",
  {}, "i", [i32(3), i32(1), i32(0), i32(-1), i32(-5)])
S("SparseXent.labels", ["SparseSoftmaxCrossEntropyWithLogits"], "index",
  "tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=i)[0]", {"x": X}, "i",
  [i32([0, 1, 3]), i32([0, 4, 1]), i32([-1, 0, 0]), i32([0, 0, 99])])
S("InTopKV2.targets", ["InTopKV2"], "index",
  "tf.raw_ops.InTopKV2(predictions=x, targets=i, k=tf.constant(2))", {"x": X}, "i",
  [i32([3, 3, 0]), i32([0, 4, 1]), i32([-1, 0, 0]), i32([0, 0, 99])])
S("InTopKV2.k", ["InTopKV2"], "size",
  "tf.raw_ops.InTopKV2(predictions=x, targets=tf.constant([3, 3, 0]), k=i)", {"x": X}, "i",
  [i32(2), i32(0), i32(4), i32(5), i32(-1)])
S("InTopK.targets", ["InTopK"], "index", "tf.raw_ops.InTopK(predictions=x, targets=i, k=2)", {"x": X}, "i",
  [i32([3, 3, 0]), i32([0, 4, 1]), i32([-1, 0, 0])])
S("TopKV2.k", ["TopKV2"], "size", "tf.raw_ops.TopKV2(input=x, k=i)", {"x": X}, "i",
  [i32(2), i32(0), i32(4), i32(5), i32(-1)])
S("MaxPoolGradWithArgmax.argmax", ["MaxPoolGradWithArgmax"], "index",
  "tf.raw_ops.MaxPoolGradWithArgmax(input=x, grad=tf.ones([1, 2, 2, 1]), argmax=i, ksize=[1, 2, 2, 1], "
  "strides=[1, 2, 2, 1], padding='VALID')", {"x": IMG}, "i",
  [i64([[[[5], [7]], [[13], [15]]]]), i64([[[[0], [0]], [[0], [0]]]]), i64([[[[16], [7]], [[13], [15]]]]),
   i64([[[[-1], [7]], [[13], [15]]]]), i64([[[[500], [7]], [[13], [15]]]])])

# ---------------------------------------------------------------- segments
for op in ("SegmentSum", "SegmentMax", "SegmentMin", "SegmentMean", "SegmentProd"):
    S(f"{op}.ids", [op], "segment_ids", f"tf.raw_ops.{op}(data=x, segment_ids=i)", {"x": X}, "i",
      [i32([0, 0, 1]), i32([0, 2, 2]), i32([1, 0, 0]), i32([-1, 0, 0]), i32([0, 0, 99]), i32([0, 1, 1]) * 0 + 2])
for op in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"):
    S(f"{op}.ids", [op], "segment_ids", f"tf.raw_ops.{op}(data=x, segment_ids=i, num_segments=3)", {"x": X}, "i",
      [i32([0, 2, 1]), i32([2, 2, 2]), i32([0, 3, 1]), i32([-1, 0, 1]), i32([0, 99, 1])])
    S(f"{op}.num", [op], "size", f"tf.raw_ops.{op}(data=x, segment_ids=tf.constant([0, 2, 1]), num_segments=i)",
      {"x": X}, "i", [i32(3), i32(5), i32(2), i32(0), i32(-1)])

# ---------------------------------------------------------------- slices
S("Slice.begin", ["Slice"], "begin", "tf.raw_ops.Slice(input=x, begin=i, size=tf.constant([2, 2]))", {"x": X}, "i",
  [i32([1, 2]), i32([0, 0]), i32([2, 0]), i32([-1, 0]), i32([0, 3]), i32([50, 0])])
S("Slice.size", ["Slice"], "size", "tf.raw_ops.Slice(input=x, begin=tf.constant([1, 1]), size=i)", {"x": X}, "i",
  [i32([2, 3]), i32([-1, -1]), i32([0, 0]), i32([3, 1]), i32([-2, 1]), i32([1, 9])])
S("Slice.len", ["Slice"], "size", "tf.raw_ops.Slice(input=x, begin=tf.constant([1, 1]), size=i)", {"x": X}, "i",
  [i32([2, 3]), i32([2]), i32([1, 1, 1])], dyn=True)
S("StridedSlice.begin", ["StridedSlice"], "begin",
  "tf.raw_ops.StridedSlice(input=x, begin=i, end=tf.constant([3, 4]), strides=tf.constant([1, 1]))", {"x": X}, "i",
  [i32([1, 1]), i32([-1, -2]), i32([5, 0]), i32([-9, 0]), i32([0, 4])])
S("StridedSlice.strides", ["StridedSlice"], "strides",
  "tf.raw_ops.StridedSlice(input=x, begin=tf.constant([0, 0]), end=tf.constant([3, 4]), strides=i)", {"x": X}, "i",
  [i32([1, 2]), i32([2, 1]), i32([-1, 1]), i32([0, 1]), i32([1, 0]), i32([5, 9])])
S("StridedSlice.shrink", ["StridedSlice"], "index",
  "tf.raw_ops.StridedSlice(input=x, begin=i, end=i + 1, strides=tf.constant([1, 1]), shrink_axis_mask=3)",
  {"x": X}, "i", [i32([0, 0]), i32([2, 3]), i32([-1, -1]), i32([3, 0]), i32([0, 4]), i32([-4, 0])])
S("StridedSliceGrad.shape", ["StridedSliceGrad"], "shape",
  "tf.raw_ops.StridedSliceGrad(shape=i, begin=tf.constant([0, 0]), end=tf.constant([2, 2]), "
  "strides=tf.constant([1, 1]), dy=tf.ones([2, 2]))", {}, "i",
  [i32([3, 4]), i32([2, 2]), i32([1, 1]), i32([-3, 4]), i32([3, 4, 1])], dyn=True)
S("MatrixBandPart.lower", ["MatrixBandPart"], "size", "tf.raw_ops.MatrixBandPart(input=x, num_lower=i, num_upper=0)",
  {"x": X}, "i", [i32(1), i32(0), i32(-1), i32(3), i32(4), i32(-2)])
S("MatrixBandPart.upper", ["MatrixBandPart"], "size", "tf.raw_ops.MatrixBandPart(input=x, num_lower=0, num_upper=i)",
  {"x": X}, "i", [i32(1), i32(0), i32(-1), i32(4), i32(5), i32(-2)])
S("ReverseSequence.lengths", ["ReverseSequence"], "lengths",
  "tf.raw_ops.ReverseSequence(input=x, seq_lengths=i, seq_dim=1, batch_dim=0)", {"x": X}, "i",
  [i32([1, 4, 2]), i32([0, 0, 0]), i32([5, 0, 0]), i32([-1, 0, 0]), i32([0, 0, 99])])
S("MatrixDiagPartV3.k", ["MatrixDiagPartV3"], "k", "tf.raw_ops.MatrixDiagPartV3(input=x, k=i, padding_value=0.)",
  {"x": X}, "i", [i32([0]), i32([1]), i32([-2]), i32([3]), i32([4]), i32([-3]), i32([9])])
S("MatrixDiagPartV3.band", ["MatrixDiagPartV3"], "k", "tf.raw_ops.MatrixDiagPartV3(input=x, k=i, padding_value=0.)",
  {"x": X}, "i", [i32([-1, 1]), i32([0, 0]), i32([1, -1]), i32([-5, 0]), i32([0, 7])])
S("MatrixDiagPartV2.k", ["MatrixDiagPartV2"], "k", "tf.raw_ops.MatrixDiagPartV2(input=x, k=i, padding_value=0.)",
  {"x": X}, "i", [i32([0]), i32([3]), i32([4]), i32([-3])])
S("MatrixDiagV3.k", ["MatrixDiagV3"], "k",
  "tf.raw_ops.MatrixDiagV3(diagonal=tf.constant([1., 2., 3.]), k=i, num_rows=-1, num_cols=-1, padding_value=0.)",
  {}, "i", [i32([0]), i32([1]), i32([-2]), i32([1, 0])])
S("MatrixDiagV3.rows", ["MatrixDiagV3"], "size",
  "tf.raw_ops.MatrixDiagV3(diagonal=tf.constant([1., 2., 3.]), k=0, num_rows=i, num_cols=-1, padding_value=0.)",
  {}, "i", [i32(-1), i32(3), i32(4), i32(2), i32(0), i32(-2)])
S("MatrixDiagV2.cols", ["MatrixDiagV2"], "size",
  "tf.raw_ops.MatrixDiagV2(diagonal=tf.constant([1., 2., 3.]), k=0, num_rows=-1, num_cols=i, padding_value=0.)",
  {}, "i", [i32(-1), i32(3), i32(5), i32(2), i32(0)])
S("MatrixSetDiagV3.k", ["MatrixSetDiagV3"], "k",
  "tf.raw_ops.MatrixSetDiagV3(input=x, diagonal=tf.constant([9., 9., 9.]), k=i)", {"x": X}, "i",
  [i32([0]), i32([1]), i32([-1]), i32([2]), i32([4]), i32([-3])])
S("MatrixSetDiagV2.k", ["MatrixSetDiagV2"], "k",
  "tf.raw_ops.MatrixSetDiagV2(input=x, diagonal=tf.constant([9., 9., 9.]), k=i)", {"x": X}, "i",
  [i32([0]), i32([1]), i32([4])])

# ---------------------------------------------------------------- shapes / sizes
S("Reshape.shape", ["Reshape"], "shape", "tf.raw_ops.Reshape(tensor=x, shape=i)", {"x": X}, "i",
  [i32([4, 3]), i32([-1, 6]), i32([2, -1]), i32([5, -1]), i32([-1, -1]), i32([0, -1]), i32([3, 5]), i32([-2, -6]),
   i32([2, -2])])
S("Reshape.rank", ["Reshape"], "shape", "tf.raw_ops.Reshape(tensor=x, shape=i)", {"x": X}, "i",
  [i32([4, 3]), i32([12]), i32([2, 3, 2]), i32([13]), i32([-1, 2, 2, 2])], dyn=True)
S("Fill.dims", ["Fill"], "shape", "tf.raw_ops.Fill(dims=i, value=tf.constant(1.5))", {}, "i",
  [i32([2, 3]), i32([0, 3]), i32([-1, 3]), i32([3, -2])])
S("Empty.shape", ["Empty"], "shape", "tf.raw_ops.Empty(shape=i, dtype=tf.float32, init=True)", {}, "i",
  [i32([2, 3]), i32([0, 3]), i32([-1, 3])])
S("BroadcastTo.shape", ["BroadcastTo"], "shape", "tf.raw_ops.BroadcastTo(input=x, shape=i)", {"x": X}, "i",
  [i32([2, 3, 4]), i32([1, 3, 4]), i32([4, 4]), i32([3, -4]), i32([0, 4]), i32([3, 1]), i32([-1, 3, 4])])
S("BroadcastTo.rank", ["BroadcastTo"], "shape", "tf.raw_ops.BroadcastTo(input=x, shape=i)", {"x": X}, "i",
  [i32([3, 4]), i32([4]), i32([2, 2, 3, 4])], dyn=True)
S("BroadcastArgs.s1", ["BroadcastArgs"], "shape", "tf.raw_ops.BroadcastArgs(s0=tf.constant([2, 3]), s1=i)", {}, "i",
  [i32([1, 3]), i32([3]), i32([4]), i32([2, 1]), i32([-1, 3]), i32([0, 3]), i32([2, 2, 3])], dyn=True)
S("BroadcastGradientArgs.s1", ["BroadcastGradientArgs"], "shape",
  "tf.raw_ops.BroadcastGradientArgs(s0=tf.constant([2, 3]), s1=i)", {}, "i",
  [i32([1, 3]), i32([3]), i32([4]), i32([2, 2, 3])], dyn=True)
S("Tile.multiples", ["Tile"], "multiples", "tf.raw_ops.Tile(input=x, multiples=i)", {"x": X}, "i",
  [i32([1, 2]), i32([2, 1]), i32([0, 1]), i32([1, -1]), i32([-3, 1])])
S("Tile.len", ["Tile"], "multiples", "tf.raw_ops.Tile(input=x, multiples=i)", {"x": X}, "i",
  [i32([1, 2]), i32([2]), i32([1, 1, 1])], dyn=True)
for op in ("Pad", "MirrorPad", "PadV2"):
    extra = {"Pad": "", "MirrorPad": ", mode='REFLECT'", "PadV2": ", constant_values=tf.constant(-1.)"}[op]
    S(f"{op}.paddings", [op], "paddings", f"tf.raw_ops.{op}(input=x, paddings=i{extra})", {"x": X}, "i",
      [i32([[1, 0], [0, 2]]), i32([[0, 0], [0, 0]]), i32([[2, 2], [3, 3]]), i32([[3, 0], [0, 0]]),
       i32([[-1, 0], [0, 0]]), i32([[0, 0], [0, -4]]), i32([[0, 0], [0, -5]]), i32([[9, 0], [0, 0]])])
S("MirrorPad.symmetric", ["MirrorPad"], "paddings", "tf.raw_ops.MirrorPad(input=x, paddings=i, mode='SYMMETRIC')",
  {"x": X}, "i", [i32([[1, 0], [0, 2]]), i32([[3, 0], [0, 4]]), i32([[4, 0], [0, 0]]), i32([[0, 0], [0, 5]])])
S("Pad.rank", ["Pad"], "paddings", "tf.raw_ops.Pad(input=x, paddings=i)", {"x": X}, "i",
  [i32([[1, 0], [0, 2]]), i32([[1, 0]]), i32([[1, 0], [0, 0], [0, 0]])], dyn=True)
S("MirrorPadGrad.paddings", ["MirrorPadGrad"], "paddings",
  "tf.raw_ops.MirrorPadGrad(input=x, paddings=i, mode='REFLECT')", {"x": X}, "i",
  [i32([[1, 0], [0, 1]]), i32([[0, 0], [0, 0]]), i32([[2, 0], [0, 0]]), i32([[-1, 0], [0, 0]]), i32([[0, 0], [3, 0]])])
for op, data in (("Transpose", X3), ("ConjugateTranspose", (X3 + 1j * X3).astype(np.complex64))):
    S(f"{op}.perm", [op], "perm", f"tf.raw_ops.{op}(x=x, perm=i)", {"x": data}, "i",
      [i32([2, 0, 1]), i32([0, 1, 2]), i32([0, 0, 1]), i32([0, 1, 3]), i32([-1, 0, 1]), i32([0, 1, 9])])
S("Transpose.len", ["Transpose"], "perm", "tf.raw_ops.Transpose(x=x, perm=i)", {"x": X3}, "i",
  [i32([2, 0, 1]), i32([1, 0]), i32([0, 1, 2, 3])], dyn=True)
S("InvertPermutation.x", ["InvertPermutation"], "perm", "tf.raw_ops.InvertPermutation(x=i)", {}, "i",
  [i32([2, 0, 1]), i32([0, 1, 2]), i32([0, 0, 1]), i32([3, 0, 1]), i32([-1, 0, 1])])
S("Range.int", ["Range"], "range", "tf.raw_ops.Range(start=i[0], limit=i[1], delta=i[2])", {}, "i",
  [i32([0, 5, 1]), i32([5, 0, -2]), i32([0, 0, 1]), i32([0, 5, 0]), i32([5, 0, 1]), i32([0, 5, -1])])
S("Bincount.arr", ["Bincount"], "index", "tf.raw_ops.Bincount(arr=i, size=4, weights=tf.zeros([0]))", {}, "i",
  [i32([0, 1, 1, 3]), i32([0, 4, 1, 1]), i32([-1, 0, 0, 0]), i32([0, 99, 0, 0])])
S("Bincount.size", ["Bincount"], "size", "tf.raw_ops.Bincount(arr=tf.constant([0, 1, 1]), size=i, weights=tf.zeros([0]))",
  {}, "i", [i32(3), i32(5), i32(1), i32(0), i32(-1)])
S("DenseBincount.input", ["DenseBincount"], "index",
  "tf.raw_ops.DenseBincount(input=i, size=4, weights=tf.zeros([0]))", {}, "i",
  [i32([0, 1, 1, 3]), i32([0, 4, 1, 1]), i32([-1, 0, 0, 0])])
S("DenseBincount.size", ["DenseBincount"], "size",
  "tf.raw_ops.DenseBincount(input=tf.constant([0, 1, 1]), size=i, weights=tf.zeros([0]))", {}, "i",
  [i32(3), i32(1), i32(0), i32(-1)])
S("ResizeBilinear.size", ["ResizeBilinear"], "shape", "tf.raw_ops.ResizeBilinear(images=x, size=i)", {"x": IMG}, "i",
  [i32([2, 2]), i32([8, 3]), i32([0, 2]), i32([-1, 2]), i32([2, -3])])
S("ResizeNearestNeighbor.size", ["ResizeNearestNeighbor"], "shape", "tf.raw_ops.ResizeNearestNeighbor(images=x, size=i)",
  {"x": IMG}, "i", [i32([2, 2]), i32([8, 3]), i32([0, 2]), i32([-1, 2])])
S("ResizeNearestNeighborGrad.size", ["ResizeNearestNeighborGrad"], "shape",
  "tf.raw_ops.ResizeNearestNeighborGrad(grads=x, size=i)", {"x": IMG}, "i",
  [i32([2, 2]), i32([8, 8]), i32([0, 2]), i32([-1, 2])])
S("AvgPoolGrad.shape", ["AvgPoolGrad"], "shape",
  "tf.raw_ops.AvgPoolGrad(orig_input_shape=i, grad=tf.ones([1, 2, 2, 1]), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], "
  "padding='VALID')", {}, "i", [i32([1, 4, 4, 1]), i32([1, 5, 5, 1]), i32([1, 8, 8, 1]), i32([1, 4, 4, 2]),
                                i32([1, -4, 4, 1]), i32([0, 4, 4, 1])])
S("AvgPool3DGrad.shape", ["AvgPool3DGrad"], "shape",
  "tf.raw_ops.AvgPool3DGrad(orig_input_shape=i, grad=tf.ones([1, 1, 2, 2, 1]), ksize=[1, 2, 2, 2, 1], "
  "strides=[1, 2, 2, 2, 1], padding='VALID')", {}, "i",
  [i32([1, 2, 4, 4, 1]), i32([1, 2, 8, 8, 1]), i32([1, -2, 4, 4, 1])])
S("Conv2DBackpropInput.sizes", ["Conv2DBackpropInput"], "shape",
  "tf.raw_ops.Conv2DBackpropInput(input_sizes=i, filter=tf.ones([2, 2, 1, 1]), out_backprop=tf.ones([1, 3, 3, 1]), "
  "strides=[1, 1, 1, 1], padding='VALID')", {}, "i",
  [i32([1, 4, 4, 1]), i32([1, 5, 5, 1]), i32([1, 4, 4, 2]), i32([2, 4, 4, 1]), i32([1, -4, 4, 1])])
S("Conv2DBackpropFilter.sizes", ["Conv2DBackpropFilter"], "shape",
  "tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=i, out_backprop=tf.ones([1, 3, 3, 1]), "
  "strides=[1, 1, 1, 1], padding='VALID')", {"x": IMG}, "i",
  [i32([2, 2, 1, 1]), i32([3, 3, 1, 1]), i32([2, 2, 2, 1]), i32([2, 2, 1, 3]), i32([-2, 2, 1, 1])])
S("DepthwiseConv2dNativeBackpropInput.sizes", ["DepthwiseConv2dNativeBackpropInput"], "shape",
  "tf.raw_ops.DepthwiseConv2dNativeBackpropInput(input_sizes=i, filter=tf.ones([2, 2, 1, 1]), "
  "out_backprop=tf.ones([1, 3, 3, 1]), strides=[1, 1, 1, 1], padding='VALID')", {}, "i",
  [i32([1, 4, 4, 1]), i32([1, 5, 5, 1]), i32([1, 4, 4, 2])])
S("DepthwiseConv2dNativeBackpropFilter.sizes", ["DepthwiseConv2dNativeBackpropFilter"], "shape",
  "tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(input=x, filter_sizes=i, out_backprop=tf.ones([1, 3, 3, 1]), "
  "strides=[1, 1, 1, 1], padding='VALID')", {"x": IMG}, "i",
  [i32([2, 2, 1, 1]), i32([3, 3, 1, 1]), i32([2, 2, 1, 2])])
S("Conv3DBackpropInputV2.sizes", ["Conv3DBackpropInputV2"], "shape",
  "tf.raw_ops.Conv3DBackpropInputV2(input_sizes=i, filter=tf.ones([1, 2, 2, 1, 1]), "
  "out_backprop=tf.ones([1, 2, 3, 3, 1]), strides=[1, 1, 1, 1, 1], padding='VALID')", {}, "i",
  [i32([1, 2, 4, 4, 1]), i32([1, 2, 5, 5, 1]), i32([1, 3, 4, 4, 1])])
S("Conv3DBackpropFilterV2.sizes", ["Conv3DBackpropFilterV2"], "shape",
  "tf.raw_ops.Conv3DBackpropFilterV2(input=tf.ones([1, 2, 4, 4, 1]), filter_sizes=i, "
  "out_backprop=tf.ones([1, 2, 3, 3, 1]), strides=[1, 1, 1, 1, 1], padding='VALID')", {}, "i",
  [i32([1, 2, 2, 1, 1]), i32([1, 3, 3, 1, 1]), i32([2, 2, 2, 1, 1])])
S("MaxPoolV2.ksize", ["MaxPoolV2"], "ksize",
  "tf.raw_ops.MaxPoolV2(input=x, ksize=i, strides=tf.constant([1, 2, 2, 1]), padding='VALID')", {"x": IMG}, "i",
  [i32([1, 2, 2, 1]), i32([1, 3, 3, 1]), i32([1, 5, 5, 1]), i32([1, 0, 2, 1]), i32([2, 2, 2, 1]), i32([1, -1, 2, 1])])
S("MaxPoolV2.strides", ["MaxPoolV2"], "strides",
  "tf.raw_ops.MaxPoolV2(input=x, ksize=tf.constant([1, 2, 2, 1]), strides=i, padding='VALID')", {"x": IMG}, "i",
  [i32([1, 2, 2, 1]), i32([1, 1, 3, 1]), i32([1, 0, 2, 1]), i32([2, 2, 2, 1]), i32([1, -1, 2, 1])])
S("MaxPoolGradV2.ksize", ["MaxPoolGradV2"], "ksize",
  "tf.raw_ops.MaxPoolGradV2(orig_input=x, orig_output=tf.nn.max_pool2d(x, 2, 2, 'VALID'), grad=tf.ones([1, 2, 2, 1]), "
  "ksize=i, strides=tf.constant([1, 2, 2, 1]), padding='VALID')", {"x": IMG}, "i",
  [i32([1, 2, 2, 1]), i32([1, 3, 3, 1]), i32([1, 0, 2, 1]), i32([2, 2, 2, 1])])
S("MaxPoolGradGradV2.ksize", ["MaxPoolGradGradV2"], "ksize",
  "tf.raw_ops.MaxPoolGradGradV2(orig_input=x, orig_output=tf.nn.max_pool2d(x, 2, 2, 'VALID'), grad=tf.ones([1, 4, 4, 1]), "
  "ksize=i, strides=tf.constant([1, 2, 2, 1]), padding='VALID')", {"x": IMG}, "i",
  [i32([1, 2, 2, 1]), i32([1, 3, 3, 1]), i32([1, 0, 2, 1])])
S("SpaceToBatchND.block", ["SpaceToBatchND"], "block_shape",
  "tf.raw_ops.SpaceToBatchND(input=x, block_shape=i, paddings=tf.zeros([2, 2], tf.int32))", {"x": IMG}, "i",
  [i32([2, 2]), i32([1, 4]), i32([3, 2]), i32([0, 2]), i32([-2, 2])])
S("SpaceToBatchND.pad", ["SpaceToBatchND"], "paddings",
  "tf.raw_ops.SpaceToBatchND(input=x, block_shape=tf.constant([2, 2]), paddings=i)", {"x": IMG}, "i",
  [i32([[0, 0], [1, 1]]), i32([[2, 0], [0, 0]]), i32([[1, 0], [0, 0]]), i32([[-2, 0], [0, 0]])])
S("BatchToSpaceND.block", ["BatchToSpaceND"], "block_shape",
  "tf.raw_ops.BatchToSpaceND(input=x, block_shape=i, crops=tf.zeros([2, 2], tf.int32))", {"x": IMG2}, "i",
  [i32([1, 1]), i32([2, 1]), i32([3, 1]), i32([0, 1]), i32([-1, 1])])
S("BatchToSpaceND.crops", ["BatchToSpaceND"], "crops",
  "tf.raw_ops.BatchToSpaceND(input=tf.reshape(x, [4, 2, 2, 2]), block_shape=tf.constant([2, 2]), crops=i)",
  {"x": IMG2}, "i", [i32([[0, 0], [1, 1]]), i32([[0, 4], [0, 0]]), i32([[5, 0], [0, 0]]), i32([[-1, 0], [0, 0]])])
S("SpaceToBatch.pad", ["SpaceToBatch"], "paddings", "tf.raw_ops.SpaceToBatch(input=x, paddings=i, block_size=2)",
  {"x": IMG}, "i", [i32([[0, 0], [2, 0]]), i32([[1, 0], [0, 0]]), i32([[-2, 0], [0, 0]])])
S("BatchToSpace.crops", ["BatchToSpace"], "crops",
  "tf.raw_ops.BatchToSpace(input=tf.reshape(x, [4, 2, 2, 2]), crops=i, block_size=2)", {"x": IMG2}, "i",
  [i32([[0, 0], [1, 1]]), i32([[0, 5], [0, 0]]), i32([[-1, 0], [0, 0]])])
S("RaggedTensorToTensor.splits", ["RaggedTensorToTensor"], "lengths",
  "tf.raw_ops.RaggedTensorToTensor(shape=tf.constant([-1, -1]), values=tf.constant([1., 2., 3.]), "
  "default_value=tf.constant(0.), row_partition_tensors=[i], row_partition_types=['ROW_SPLITS'])", {}, "i",
  [i64([0, 2, 3]), i64([0, 0, 3]), i64([0, 3, 2]), i64([0, 2, 7]), i64([1, 2, 3]), i64([0, -1, 3])])
S("RaggedTensorToTensor.shape", ["RaggedTensorToTensor"], "shape",
  "tf.raw_ops.RaggedTensorToTensor(shape=i, values=tf.constant([1., 2., 3.]), "
  "default_value=tf.constant(0.), row_partition_tensors=[tf.constant([0, 2, 3], tf.int64)], "
  "row_partition_types=['ROW_SPLITS'])", {}, "i",
  [i64([-1, -1]), i64([2, 2]), i64([1, 1]), i64([3, 4]), i64([-2, 2])])
for op in ("StatelessRandomNormal", "StatelessRandomUniform", "StatelessTruncatedNormal"):
    S(f"{op}.shape", [op], "shape", f"tf.raw_ops.{op}(shape=i, seed=tf.constant([1, 2]))", {}, "i",
      [i32([2, 3]), i32([0, 3]), i32([-1, 3])], shape_only=True)
S("StatelessRandomNormalV2.shape", ["StatelessRandomNormalV2"], "shape",
  "tf.raw_ops.StatelessRandomNormalV2(shape=i, key=tf.constant([1], tf.uint64), counter=tf.constant([0, 0], tf.uint64), alg=1)",
  {}, "i", [i32([2, 3]), i32([0, 3]), i32([-1, 3])], shape_only=True)
S("StatelessRandomUniformInt.shape", ["StatelessRandomUniformInt"], "shape",
  "tf.raw_ops.StatelessRandomUniformInt(shape=i, seed=tf.constant([1, 2]), minval=0, maxval=10)", {}, "i",
  [i32([2, 3]), i32([-1, 3])], shape_only=True)
S("StatelessRandomUniformInt.range", ["StatelessRandomUniformInt"], "range",
  "tf.raw_ops.StatelessRandomUniformInt(shape=[4], seed=tf.constant([1, 2]), minval=i[0], maxval=i[1])", {}, "i",
  [i32([0, 10]), i32([5, 5]), i32([10, 0])], shape_only=True)
S("StatelessMultinomial.num", ["StatelessMultinomial"], "size",
  "tf.raw_ops.StatelessMultinomial(logits=x, num_samples=i, seed=tf.constant([1, 2]))", {"x": X}, "i",
  [i32(2), i32(0), i32(-1)], shape_only=True)
S("StatelessRandomNormalV2.alg", ["StatelessRandomNormalV2"], "alg",
  "tf.raw_ops.StatelessRandomNormalV2(shape=[2], key=tf.constant([1], tf.uint64), counter=tf.constant([0, 0], tf.uint64), alg=i)",
  {}, "i", [i32(1), i32(3), i32(7), i32(-1)], shape_only=True)

# ---------------------------------------------------------------- integer arithmetic on data
A = i32([7, -7, 2 ** 31 - 1, -2 ** 31])
for op in ("FloorDiv", "FloorMod", "Div"):
    S(f"{op}.zero", [op], "divisor", f"tf.raw_ops.{op}(x=a, y=i)", {"a": A}, "i",
      [i32([2, 2, 3, -3]), i32([2, 0, 1, 1]), i32([1, 1, 1, -1])])
    S(f"{op}.zero64", [op], "divisor", f"tf.raw_ops.{op}(x=a, y=i)", {"a": i64([7, -7])}, "i",
      [i64([2, -3]), i64([0, 1])])
S("DivNoNan.zero", ["DivNoNan"], "divisor", "tf.raw_ops.DivNoNan(x=tf.constant([1., 2.]), y=tf.cast(i, tf.float32))",
  {}, "i", [i32([2, 0])])
S("Pow.neg", ["Pow"], "exponent", "tf.raw_ops.Pow(x=a, y=i)", {"a": i32([2, 3, 1])}, "i",
  [i32([3, 0, 5]), i32([-1, 2, 2]), i32([2, 2, -3]), i32([31, 1, 1])])
for op in ("LeftShift", "RightShift"):
    S(f"{op}.amount", [op], "shift", f"tf.raw_ops.{op}(x=a, y=i)", {"a": i32([5, -5, 1])}, "i",
      [i32([1, 2, 3]), i32([31, 31, 31]), i32([32, 33, 40]), i32([-1, -2, -33])])
S("Abs.min", ["Abs"], "overflow", "tf.raw_ops.Abs(x=i)", {}, "i", [i32([-2 ** 31, 5])])
S("Neg.min", ["Neg"], "overflow", "tf.raw_ops.Neg(x=i)", {}, "i", [i32([-2 ** 31, 5])])
S("Cast.int64", ["Cast"], "overflow", "tf.raw_ops.Cast(x=i, DstT=tf.int32)", {}, "i",
  [i64([1, -1]), i64([2 ** 31, 2 ** 40 + 3])])

# ---------------------------------------------------------------- control flow, lists
S("Case.branch", ["Case", "StatelessCase"], "index",
  "tf.switch_case(i, [lambda: x * 1., lambda: x * 2., lambda: x * 3.])", {"x": X}, "i",
  [i32(0), i32(2), i32(3), i32(-1), i32(100), i32(-100)])
S("TensorListGetItem.index", ["TensorListGetItem"], "index",
  "tf.raw_ops.TensorListGetItem(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "index=i, element_shape=tf.constant([4]), element_dtype=tf.float32)", {"x": X}, "i", idx_scalars(3))
S("TensorListSetItem.index", ["TensorListSetItem"], "index",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListSetItem(input_handle=tf.raw_ops.TensorListFromTensor("
  "tensor=x, element_shape=tf.constant([4])), index=i, item=x[0] * 0 + 9.), element_shape=tf.constant([4]), "
  "element_dtype=tf.float32)", {"x": X}, "i", idx_scalars(3))
S("TensorListGather.indices", ["TensorListGather"], "index",
  "tf.raw_ops.TensorListGather(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "indices=i, element_shape=tf.constant([4]), element_dtype=tf.float32)", {"x": X}, "i", idx_vectors(3))
S("TensorListScatterV2.indices", ["TensorListScatterV2"], "index",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListScatterV2(tensor=x[:2], indices=i, "
  "element_shape=tf.constant([4]), num_elements=3), element_shape=tf.constant([4]), element_dtype=tf.float32)",
  {"x": X}, "i", [i32([0, 2]), i32([2, 0]), i32([0, 0]), i32([0, 3]), i32([-1, 0])])
S("TensorListScatterV2.num", ["TensorListScatterV2"], "size",
  "tf.raw_ops.TensorListLength(input_handle=tf.raw_ops.TensorListScatterV2(tensor=x[:2], indices=tf.constant([0, 1]), "
  "element_shape=tf.constant([4]), num_elements=i))", {"x": X}, "i", [i32(3), i32(-1), i32(1), i32(0), i32(-2)])
S("TensorListScatter.indices", ["TensorListScatter"], "index",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListScatter(tensor=x[:2], indices=i, "
  "element_shape=tf.constant([4])), element_shape=tf.constant([4]), element_dtype=tf.float32)",
  {"x": X}, "i", [i32([0, 1]), i32([1, 0]), i32([0, 3]), i32([-1, 0])])
S("TensorListScatterIntoExistingList.indices", ["TensorListScatterIntoExistingList"], "index",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListScatterIntoExistingList(input_handle="
  "tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), tensor=x[:2] + 100., indices=i), "
  "element_shape=tf.constant([4]), element_dtype=tf.float32)", {"x": X}, "i",
  [i32([0, 1]), i32([2, 0]), i32([0, 3]), i32([-1, 0])])
S("TensorListReserve.num", ["TensorListReserve"], "size",
  "tf.raw_ops.TensorListLength(input_handle=tf.raw_ops.TensorListReserve(element_shape=tf.constant([4]), "
  "num_elements=i, element_dtype=tf.float32))", {}, "i", [i32(3), i32(0), i32(-1), i32(-2)])
S("TensorListReserve.stack", ["TensorListReserve"], "size",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListSetItem(input_handle=tf.raw_ops.TensorListReserve("
  "element_shape=tf.constant([4]), num_elements=i, element_dtype=tf.float32), index=0, item=tf.ones([4])), "
  "element_shape=tf.constant([4]), element_dtype=tf.float32)", {}, "i", [i32(3), i32(1), i32(0), i32(-1)])
S("TensorListResize.size", ["TensorListResize"], "size",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListResize(input_handle=tf.raw_ops.TensorListFromTensor("
  "tensor=x, element_shape=tf.constant([4])), size=i), element_shape=tf.constant([4]), element_dtype=tf.float32)",
  {"x": X}, "i", [i32(3), i32(2), i32(5), i32(0), i32(-1)])
S("TensorListSplit.lengths", ["TensorListSplit"], "lengths",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListSplit(tensor=x, element_shape=tf.constant([-1, 4]), "
  "lengths=i), element_shape=tf.constant([1, 4]), element_dtype=tf.float32)", {"x": X}, "i",
  [i64([1, 1, 1]), i64([1, 2, 0]), i64([1, 1, 2]), i64([-1, 2, 2]), i64([3, 0, 0])])
S("TensorListSplit.lengths_len", ["TensorListSplit"], "lengths",
  "tf.raw_ops.TensorListLength(input_handle=tf.raw_ops.TensorListSplit(tensor=x, element_shape=tf.constant([-1, 4]), "
  "lengths=i))", {"x": X}, "i", [i64([1, 2]), i64([1, 1]), i64([4, -1]), i64([2, 2])])
S("TensorListConcatV2.leading", ["TensorListConcatV2"], "lengths",
  "tf.raw_ops.TensorListConcatV2(input_handle=tf.raw_ops.TensorListFromTensor(tensor=tf.reshape(x, [3, 1, 4]), "
  "element_shape=tf.constant([1, 4])), element_shape=tf.constant([-1, 4]), leading_dims=i, element_dtype=tf.float32)[0]",
  {"x": X}, "i", [i64([1, 1, 1]), i64([2, 2, 2]), i64([-1, 1, 1])])
S("EmptyTensorList.max", ["EmptyTensorList", "TensorListPushBack"], "size",
  "tf.raw_ops.TensorListLength(input_handle=tf.raw_ops.TensorListPushBack(input_handle=tf.raw_ops.EmptyTensorList("
  "element_shape=tf.constant([4]), max_num_elements=i, element_dtype=tf.float32), tensor=x[0]))", {"x": X}, "i",
  [i32(-1), i32(3), i32(1), i32(0), i32(-2)])
S("TensorArray.read", ["TensorListGetItem"], "index",
  "tf.TensorArray(tf.float32, size=3).unstack(x).read(i)", {"x": X}, "i", idx_scalars(3))
S("TensorArray.write", ["TensorListSetItem"], "index",
  "tf.TensorArray(tf.float32, size=3).unstack(x).write(i, x[0] + 10.).stack()", {"x": X}, "i", idx_scalars(3))
S("TensorArray.gather", ["TensorListGather"], "index",
  "tf.TensorArray(tf.float32, size=3).unstack(x).gather(i)", {"x": X}, "i", idx_vectors(3))
S("TensorArray.size", ["TensorListReserve"], "size",
  "tf.TensorArray(tf.float32, size=i, element_shape=[4]).write(0, x[0]).stack()", {"x": X}, "i",
  [i32(3), i32(1), i32(0), i32(-1)])

# element_shape arguments of the list ops (a shape the list's elements must match)
S("TensorListStack.element_shape", ["TensorListStack"], "shape",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "element_shape=i, element_dtype=tf.float32)", {"x": X}, "i", [i32([4]), i32([-1]), i32([5]), i32([0]), i32([-2])])
S("TensorListGetItem.element_shape", ["TensorListGetItem"], "shape",
  "tf.raw_ops.TensorListGetItem(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "index=1, element_shape=i, element_dtype=tf.float32)", {"x": X}, "i", [i32([4]), i32([-1]), i32([5]), i32([3])])
S("TensorListFromTensor.element_shape", ["TensorListFromTensor"], "shape",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=i), "
  "element_shape=tf.constant([4]), element_dtype=tf.float32)", {"x": X}, "i", [i32([4]), i32([-1]), i32([5]), i32([2])])
S("TensorListReserve.element_shape", ["TensorListReserve"], "shape",
  "tf.raw_ops.TensorListStack(input_handle=tf.raw_ops.TensorListSetItem(input_handle=tf.raw_ops.TensorListReserve("
  "element_shape=i, num_elements=2, element_dtype=tf.float32), index=0, item=tf.ones([4])), "
  "element_shape=tf.constant([4]), element_dtype=tf.float32)", {}, "i", [i32([4]), i32([-1]), i32([5])])
S("TensorListPopBack.element_shape", ["TensorListPopBack"], "shape",
  "tf.raw_ops.TensorListPopBack(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "element_shape=i, element_dtype=tf.float32)[1]", {"x": X}, "i", [i32([4]), i32([-1]), i32([5])])
S("TensorListPopBack.empty", ["TensorListPopBack", "TensorListReserve"], "size",
  "tf.raw_ops.TensorListPopBack(input_handle=tf.raw_ops.TensorListReserve(element_shape=tf.constant([4]), "
  "num_elements=i, element_dtype=tf.float32), element_shape=tf.constant([4]), element_dtype=tf.float32)[1]", {}, "i",
  [i32(2), i32(0)])
S("TensorListGather.element_shape", ["TensorListGather"], "shape",
  "tf.raw_ops.TensorListGather(input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([4])), "
  "indices=tf.constant([0, 2]), element_shape=i, element_dtype=tf.float32)", {"x": X}, "i", [i32([4]), i32([5])])
S("StridedSlice.end", ["StridedSlice"], "end",
  "tf.raw_ops.StridedSlice(input=x, begin=tf.constant([0, 0]), end=i, strides=tf.constant([1, 1]))", {"x": X}, "i",
  [i32([2, 3]), i32([3, 4]), i32([9, 9]), i32([-1, -1]), i32([-9, 0]), i32([0, 0])])
S("Slice.begin_size", ["Slice"], "begin", "tf.raw_ops.Slice(input=x, begin=i, size=tf.constant([-1, -1]))", {"x": X},
  "i", [i32([1, 2]), i32([3, 4]), i32([4, 0]), i32([-1, 0])])

# ---------------------------------------------------------------- TF1 graphs (jta.import_graph_def): TensorArray v3, stacks
TA_MAKE = ("ta, flow = tf.raw_ops.TensorArrayV3(size=3, dtype=tf.float32, element_shape=tf.TensorShape([4]))\n"
           "flow = tf.raw_ops.TensorArrayScatterV3(handle=ta, indices=tf.range(3), value=x, flow_in=flow)\n")
S("TensorArrayReadV3.index", ["TensorArrayReadV3"], "index",
  TA_MAKE + "return tf.raw_ops.TensorArrayReadV3(handle=ta, index=i, flow_in=flow, dtype=tf.float32)",
  {"x": X}, "i", idx_scalars(3), route="graph")
S("TensorArrayWriteV3.index", ["TensorArrayWriteV3"], "index",
  TA_MAKE + "flow = tf.raw_ops.TensorArrayWriteV3(handle=ta, index=i, value=x[0] + 10., flow_in=flow)\n"
  "return tf.raw_ops.TensorArrayGatherV3(handle=ta, indices=tf.range(3), flow_in=flow, dtype=tf.float32)",
  {"x": X}, "i", idx_scalars(3), route="graph")
S("TensorArrayGatherV3.indices", ["TensorArrayGatherV3"], "index",
  TA_MAKE + "return tf.raw_ops.TensorArrayGatherV3(handle=ta, indices=i, flow_in=flow, dtype=tf.float32)",
  {"x": X}, "i", idx_vectors(3), route="graph")
S("TensorArrayScatterV3.indices", ["TensorArrayScatterV3"], "index",
  "ta, flow = tf.raw_ops.TensorArrayV3(size=3, dtype=tf.float32, element_shape=tf.TensorShape([4]))\n"
  "flow = tf.raw_ops.TensorArrayScatterV3(handle=ta, indices=i, value=x[:2], flow_in=flow)\n"
  "return tf.raw_ops.TensorArrayReadV3(handle=ta, index=i[0], flow_in=flow, dtype=tf.float32)",
  {"x": X}, "i", [i32([0, 2]), i32([2, 0]), i32([0, 3]), i32([-1, 0]), i32([0, 99])], route="graph")
S("TensorArraySplitV3.lengths", ["TensorArraySplitV3"], "lengths",
  "ta, flow = tf.raw_ops.TensorArrayV3(size=3, dtype=tf.float32, element_shape=tf.TensorShape([None, 4]))\n"
  "flow = tf.raw_ops.TensorArraySplitV3(handle=ta, value=x, lengths=i, flow_in=flow)\n"
  "return tf.raw_ops.TensorArrayReadV3(handle=ta, index=0, flow_in=flow, dtype=tf.float32)",
  {"x": X}, "i", [i64([1, 1, 1]), i64([2, 1, 0]), i64([1, 1, 2]), i64([-1, 2, 2]), i64([3, 0, 0])], route="graph")
S("TensorArrayV3.size", ["TensorArrayV3"], "size",
  "ta, flow = tf.raw_ops.TensorArrayV3(size=i, dtype=tf.float32, element_shape=tf.TensorShape([4]))\n"
  "flow = tf.raw_ops.TensorArrayWriteV3(handle=ta, index=0, value=x[0], flow_in=flow)\n"
  "return tf.raw_ops.TensorArraySizeV3(handle=ta, flow_in=flow)",
  {"x": X}, "i", [i32(3), i32(1), i32(0), i32(-1)], route="graph")
S("StackV2.max_size", ["StackV2", "StackPushV2"], "size",
  "h = tf.raw_ops.StackV2(max_size=i, elem_type=tf.float32)\n"
  "p = tf.raw_ops.StackPushV2(handle=h, elem=x[0])\n"
  "with tf.control_dependencies([p]):\n"
  "    p2 = tf.raw_ops.StackPushV2(handle=h, elem=x[1])\n"
  "with tf.control_dependencies([p2]):\n"
  "    return tf.raw_ops.StackPopV2(handle=h, elem_type=tf.float32)",
  {"x": X}, "i", [i32(-1), i32(2), i32(5), i32(1), i32(0)], route="graph")

# the V2 stateless random ops (shape, and minval/maxval); seeds/keys are out of scope
KC = "key=tf.constant([1], tf.uint64), counter=tf.constant([0, 0], tf.uint64), alg=1"
for op in ("StatelessRandomUniformV2", "StatelessTruncatedNormalV2", "StatelessRandomUniformFullIntV2"):
    extra = ", dtype=tf.int32" if "FullInt" in op else ""
    S(f"{op}.shape", [op], "shape", f"tf.raw_ops.{op}(shape=i, {KC}{extra})", {}, "i",
      [i32([2, 3]), i32([0, 3]), i32([-1, 3])], shape_only=True)
S("StatelessRandomUniformFullInt.shape", ["StatelessRandomUniformFullInt"], "shape",
  "tf.raw_ops.StatelessRandomUniformFullInt(shape=i, seed=tf.constant([1, 2]), dtype=tf.int32)", {}, "i",
  [i32([2, 3]), i32([-1, 3])], shape_only=True)
S("StatelessRandomUniformIntV2.range", ["StatelessRandomUniformIntV2"], "range",
  f"tf.raw_ops.StatelessRandomUniformIntV2(shape=[4], {KC}, minval=i[0], maxval=i[1])", {}, "i",
  [i32([0, 10]), i32([5, 5]), i32([10, 0])], shape_only=True)
S("StatelessRandomUniformIntV2.shape", ["StatelessRandomUniformIntV2"], "shape",
  f"tf.raw_ops.StatelessRandomUniformIntV2(shape=i, {KC}, minval=0, maxval=10)", {}, "i",
  [i32([2, 3]), i32([-1, 3])], shape_only=True)
S("Case.stateful", ["Case"], "index",
  "tf.switch_case(i, [lambda: x * 1. + v, lambda: x * 2.])", {"x": X}, "i", [i32(0), i32(1), i32(2), i32(-1), i32(99)],
  setup="v = tf.Variable(1.0, name='v')")

# wrong lengths reaching the kernel (unknown-length run-time vectors)
S("SplitV.count", ["SplitV"], "size", "tf.raw_ops.SplitV(value=x, size_splits=i, axis=1, num_split=2)", {"x": X}, "i",
  [i32([1, 3]), i32([1, 1, 2]), i32([4])], dyn=True)
S("MatrixDiagPartV3.klen", ["MatrixDiagPartV3"], "k", "tf.raw_ops.MatrixDiagPartV3(input=x, k=i, padding_value=0.)",
  {"x": X}, "i", [i32([0]), i32([0, 1]), i32([0, 1, 2]), i32([])], dyn=True)
S("StridedSlice.len", ["StridedSlice"], "begin",
  "tf.raw_ops.StridedSlice(input=x, begin=i, end=tf.constant([3, 4]), strides=tf.constant([1, 1]))", {"x": X}, "i",
  [i32([1, 1]), i32([1]), i32([0, 0, 0])], dyn=True)
S("GatherNd.depth", ["GatherNd"], "index", "tf.raw_ops.GatherNd(params=x, indices=i)", {"x": X}, "i",
  [i32([[0, 1]]), i32([[0, 1, 0]]), i32([[1]])], dyn=True)
S("ScatterNd.shape_len", ["ScatterNd"], "shape",
  "tf.raw_ops.ScatterNd(indices=tf.constant([[0, 1]]), updates=tf.constant([1.]), shape=i)", {}, "i",
  [i32([3, 4]), i32([3]), i32([3, 4, 2])], dyn=True)

"""What the op-table fuzzer still finds (``tests/test_op_fuzz.py``), by cell: how jta differs from
TensorFlow there (eagerly or under ``jta.checked``). Each is a check of TensorFlow's kernel that jta lacks
(or writes with JAX's text), or a quirk of TensorFlow's (a no-op ``Reshape`` that grappler removes, a
``BroadcastTo`` of a run-time shape that returns its input); the test fails for a cell that agrees now."""

KNOWN: dict[str, str] = {
    # ArgMax.dim
    'ArgMax.dim#4': "TF's class, not its text",
    'ArgMax.dim#5': "TF's class, not its text",
    'ArgMax.dim#6': "TF's class, not its text",
    # ArgMin.dim
    'ArgMin.dim#4': "TF's class, not its text",
    'ArgMin.dim#5': "TF's class, not its text",
    'ArgMin.dim#6': "TF's class, not its text",
    # AvgPool3DGrad.shape
    'AvgPool3DGrad.shape#1': 'an error where TF gives a value',
    'AvgPool3DGrad.shape#2': "TF's class, not its text",
    'AvgPool3DGrad.shape#c1': 'an error where TF gives a value',
    # AvgPoolGrad.shape
    'AvgPoolGrad.shape#2': 'an error where TF gives a value',
    'AvgPoolGrad.shape#3': 'an error where TF gives a value',
    'AvgPoolGrad.shape#4': "TF's class, not its text",
    'AvgPoolGrad.shape#5': "TF's class, not its text",
    'AvgPoolGrad.shape#c2': 'an error where TF gives a value',
    'AvgPoolGrad.shape#c3': 'an error where TF gives a value',
    'AvgPoolGrad.shape#c5': 'an error where TF gives a value',
    # BatchToSpace.crops
    'BatchToSpace.crops#1': 'a value where TF raises',
    'BatchToSpace.crops#2': 'a value where TF raises',
    # BatchToSpaceND.block
    'BatchToSpaceND.block#1': "TF's class, not its text",
    'BatchToSpaceND.block#2': "TF's class, not its text",
    'BatchToSpaceND.block#3': "TF's class, not its text",
    'BatchToSpaceND.block#4': "TF's class, not its text",
    # BatchToSpaceND.crops
    'BatchToSpaceND.crops#2': 'a value where TF raises',
    'BatchToSpaceND.crops#3': 'a value where TF raises',
    # Bincount.size
    'Bincount.size#4': "TF's class, not its text",
    # BroadcastArgs.s1
    'BroadcastArgs.s1#2': "TF's class, not its text",
    'BroadcastArgs.s1#4': "TF's class, not its text",
    'BroadcastArgs.s1#5': "TF's class, not its text",
    'BroadcastArgs.s1#c2': "TF's class, not its text",
    'BroadcastArgs.s1#c4': "TF's class, not its text",
    'BroadcastArgs.s1#c5': "TF's class, not its text",
    # BroadcastGradientArgs.s1
    'BroadcastGradientArgs.s1#2': "TF's class, not its text",
    'BroadcastGradientArgs.s1#c2': "TF's class, not its text",
    # BroadcastTo.rank
    'BroadcastTo.rank#1': "TF's class, not its text",
    # BroadcastTo.shape
    'BroadcastTo.shape#2': 'an error where TF gives a value',
    'BroadcastTo.shape#3': 'an error where TF gives a value',
    'BroadcastTo.shape#4': 'an error where TF gives a value',
    'BroadcastTo.shape#5': 'an error where TF gives a value',
    # Concat.dim
    'Concat.dim#4': "TF's class, not its text",
    'Concat.dim#5': "TF's class, not its text",
    'Concat.dim#6': "TF's class, not its text",
    # ConcatOffset.dim
    'ConcatOffset.dim#2': 'a value where TF raises',
    'ConcatOffset.dim#3': 'a value where TF raises',
    'ConcatOffset.dim#4': 'a value where TF raises',
    'ConcatOffset.dim#c2': 'a value where TF raises',
    'ConcatOffset.dim#c3': 'a value where TF raises',
    'ConcatOffset.dim#c4': 'a value where TF raises',
    # ConcatV2.axis
    'ConcatV2.axis#4': "TF's class, not its text",
    'ConcatV2.axis#5': "TF's class, not its text",
    'ConcatV2.axis#6': "TF's class, not its text",
    # ConcatV2.axis_mismatch
    'ConcatV2.axis_mismatch#2': "TF's class, not its text",
    'ConcatV2.axis_mismatch#3': "TF's class, not its text",
    'ConcatV2.axis_mismatch#4': "TF's class, not its text",
    # Conv2DBackpropFilter.sizes
    'Conv2DBackpropFilter.sizes#1': 'another exception class',
    'Conv2DBackpropFilter.sizes#2': "TF's class, not its text",
    'Conv2DBackpropFilter.sizes#3': 'another exception class',
    'Conv2DBackpropFilter.sizes#4': "TF's class, not its text",
    'Conv2DBackpropFilter.sizes#c1': 'another exception class',
    'Conv2DBackpropFilter.sizes#c2': "TF's class, not its text",
    'Conv2DBackpropFilter.sizes#c3': 'another exception class',
    # Conv2DBackpropInput.sizes
    'Conv2DBackpropInput.sizes#1': 'another exception class',
    'Conv2DBackpropInput.sizes#2': "TF's class, not its text",
    'Conv2DBackpropInput.sizes#3': 'another exception class',
    'Conv2DBackpropInput.sizes#c1': 'another exception class',
    'Conv2DBackpropInput.sizes#c2': "TF's class, not its text",
    # Conv3DBackpropFilterV2.sizes
    'Conv3DBackpropFilterV2.sizes#1': 'another exception class',
    'Conv3DBackpropFilterV2.sizes#2': 'another exception class',
    'Conv3DBackpropFilterV2.sizes#c1': 'another exception class',
    'Conv3DBackpropFilterV2.sizes#c2': 'another exception class',
    # Conv3DBackpropInputV2.sizes
    'Conv3DBackpropInputV2.sizes#1': 'another exception class',
    'Conv3DBackpropInputV2.sizes#2': 'another exception class',
    'Conv3DBackpropInputV2.sizes#c1': 'another exception class',
    'Conv3DBackpropInputV2.sizes#c2': 'another exception class',
    # DenseBincount.size
    'DenseBincount.size#3': "TF's class, not its text",
    # DepthwiseConv2dNativeBackpropFilter.sizes
    'DepthwiseConv2dNativeBackpropFilter.sizes#1': 'another exception class',
    'DepthwiseConv2dNativeBackpropFilter.sizes#2': 'another exception class',
    'DepthwiseConv2dNativeBackpropFilter.sizes#c1': 'another exception class',
    'DepthwiseConv2dNativeBackpropFilter.sizes#c2': 'another exception class',
    # DepthwiseConv2dNativeBackpropInput.sizes
    'DepthwiseConv2dNativeBackpropInput.sizes#1': 'another exception class',
    'DepthwiseConv2dNativeBackpropInput.sizes#2': "TF's class, not its text",
    'DepthwiseConv2dNativeBackpropInput.sizes#c1': 'another exception class',
    'DepthwiseConv2dNativeBackpropInput.sizes#c2': "TF's class, not its text",
    # EmptyTensorList.max
    'EmptyTensorList.max#3': 'a value where TF raises',
    # ExpandDims.dim
    'ExpandDims.dim#4': "TF's class, not its text",
    'ExpandDims.dim#5': "TF's class, not its text",
    'ExpandDims.dim#6': "TF's class, not its text",
    # GatherNd.depth
    'GatherNd.depth#1': "TF's class, not its text",
    # GatherV2.axis_bd
    'GatherV2.axis_bd#2': "TF's class, not its text",
    'GatherV2.axis_bd#c2': "TF's class, not its text",
    # GatherV2.idx64
    'GatherV2.idx64#3': 'a value where TF raises',
    'GatherV2.idx64#4': 'a value where TF raises',
    # InplaceAdd.i
    'InplaceAdd.i#2': 'another value',
    'InplaceAdd.i#4': 'another value',
    'InplaceAdd.i#c2': 'another value',
    'InplaceAdd.i#c4': 'another value',
    # LeftShift.amount
    'LeftShift.amount#2': 'another value',
    'LeftShift.amount#3': 'another value',
    'LeftShift.amount#c2': 'another value',
    'LeftShift.amount#c3': 'another value',
    # MatrixDiagPartV2.k
    'MatrixDiagPartV2.k#2': 'a value where TF raises',
    'MatrixDiagPartV2.k#3': 'a value where TF raises',
    # MatrixDiagPartV3.band
    'MatrixDiagPartV3.band#2': "TF's class, not its text",
    'MatrixDiagPartV3.band#3': 'a value where TF raises',
    'MatrixDiagPartV3.band#4': 'a value where TF raises',
    # MatrixDiagPartV3.k
    'MatrixDiagPartV3.k#4': 'a value where TF raises',
    'MatrixDiagPartV3.k#5': 'a value where TF raises',
    'MatrixDiagPartV3.k#6': 'a value where TF raises',
    # MatrixDiagPartV3.klen
    'MatrixDiagPartV3.klen#2': 'a value where TF raises',
    'MatrixDiagPartV3.klen#3': "TF's class, not its text",
    # MatrixDiagV2.cols
    'MatrixDiagV2.cols#3': 'a value where TF raises',
    'MatrixDiagV2.cols#4': 'a value where TF raises',
    # MatrixDiagV3.k
    'MatrixDiagV3.k#3': 'a value where TF raises',
    # MatrixDiagV3.rows
    'MatrixDiagV3.rows#3': 'a value where TF raises',
    'MatrixDiagV3.rows#4': 'a value where TF raises',
    'MatrixDiagV3.rows#5': "TF's class, not its text",
    # MatrixSetDiagV2.k
    'MatrixSetDiagV2.k#2': 'a value where TF raises',
    # MatrixSetDiagV3.k
    'MatrixSetDiagV3.k#2': 'a value where TF raises',
    'MatrixSetDiagV3.k#3': 'a value where TF raises',
    'MatrixSetDiagV3.k#4': 'a value where TF raises',
    'MatrixSetDiagV3.k#5': 'a value where TF raises',
    'MatrixSetDiagV3.k#c2': 'a value where TF raises',
    'MatrixSetDiagV3.k#c3': 'a value where TF raises',
    # MaxPoolGradGradV2.ksize
    'MaxPoolGradGradV2.ksize#1': "TF's class, not its text",
    'MaxPoolGradGradV2.ksize#2': "TF's class, not its text",
    # MaxPoolGradV2.ksize
    'MaxPoolGradV2.ksize#1': "TF's class, not its text",
    'MaxPoolGradV2.ksize#2': "TF's class, not its text",
    'MaxPoolGradV2.ksize#c1': "TF's class, not its text",
    'MaxPoolGradV2.ksize#c2': "TF's class, not its text",
    # MirrorPad.paddings
    'MirrorPad.paddings#4': "TF's class, not its text",
    'MirrorPad.paddings#5': "TF's class, not its text",
    'MirrorPad.paddings#6': "TF's class, not its text",
    # MirrorPadGrad.paddings
    'MirrorPadGrad.paddings#3': "TF's class, not its text",
    # Pad.paddings
    'Pad.paddings#4': "TF's class, not its text",
    'Pad.paddings#5': "TF's class, not its text",
    'Pad.paddings#6': "TF's class, not its text",
    # Pad.rank
    'Pad.rank#1': 'a value where TF raises',
    'Pad.rank#2': "TF's class, not its text",
    # PadV2.paddings
    'PadV2.paddings#4': "TF's class, not its text",
    'PadV2.paddings#5': "TF's class, not its text",
    'PadV2.paddings#6': "TF's class, not its text",
    # Reshape.shape
    'Reshape.shape#c4': 'an error where TF gives a value',
    # ReverseV2.axis
    'ReverseV2.axis#3': "TF's class, not its text",
    'ReverseV2.axis#4': "TF's class, not its text",
    'ReverseV2.axis#5': "TF's class, not its text",
    # ReverseV2.axis2
    'ReverseV2.axis2#2': "TF's class, not its text",
    'ReverseV2.axis2#3': "TF's class, not its text",
    'ReverseV2.axis2#4': "TF's class, not its text",
    # RightShift.amount
    'RightShift.amount#3': 'another value',
    'RightShift.amount#c3': 'another value',
    # ScatterNd.shape
    'ScatterNd.shape#4': "TF's class, not its text",
    'ScatterNd.shape#5': "TF's class, not its text",
    'ScatterNd.shape#6': "TF's class, not its text",
    'ScatterNd.shape#c6': "TF's class, not its text",
    # ScatterNd.shape_len
    'ScatterNd.shape_len#1': "TF's class, not its text",
    'ScatterNd.shape_len#2': 'a value where TF raises',
    'ScatterNd.shape_len#c1': "TF's class, not its text",
    # Slice.len
    'Slice.len#1': 'a value where TF raises',
    'Slice.len#2': 'a value where TF raises',
    # Slice.size
    'Slice.size#4': 'a value where TF raises',
    # SpaceToBatch.pad
    'SpaceToBatch.pad#1': "TF's class, not its text",
    'SpaceToBatch.pad#2': "TF's class, not its text",
    # SpaceToBatchND.block
    'SpaceToBatchND.block#2': "TF's class, not its text",
    'SpaceToBatchND.block#3': "TF's class, not its text",
    'SpaceToBatchND.block#4': "TF's class, not its text",
    # SpaceToBatchND.pad
    'SpaceToBatchND.pad#2': "TF's class, not its text",
    'SpaceToBatchND.pad#3': "TF's class, not its text",
    # SparseXent.labels
    'SparseXent.labels#1': "TF's class, not its text",
    'SparseXent.labels#2': "TF's class, not its text",
    'SparseXent.labels#3': "TF's class, not its text",
    # Split.dim
    'Split.dim#2': "TF's class, not its text",
    'Split.dim#3': "TF's class, not its text",
    'Split.dim#4': "TF's class, not its text",
    'Split.dim#5': "TF's class, not its text",
    # SplitV.count
    'SplitV.count#1': 'a value where TF raises',
    'SplitV.count#2': 'another exception class',
    # SplitV.sizes
    'SplitV.sizes#4': "TF's class, not its text",
    'SplitV.sizes#5': "TF's class, not its text",
    'SplitV.sizes#6': 'a value where TF raises',
    'SplitV.sizes#7': 'a value where TF raises',
    'SplitV.sizes#8': "TF's class, not its text",
    'SplitV.sizes#9': "TF's class, not its text",
    # StackV2.max_size
    'StackV2.max_size#3': 'a value where TF raises',
    'StackV2.max_size#4': 'a value where TF raises',
    'StackV2.max_size#c3': 'a value where TF raises',
    'StackV2.max_size#c4': 'a value where TF raises',
    # StatelessMultinomial.num
    'StatelessMultinomial.num#2': 'a value where TF raises',
    # StatelessRandomUniformInt.range
    'StatelessRandomUniformInt.range#1': 'a value where TF raises',
    'StatelessRandomUniformInt.range#2': 'a value where TF raises',
    # StatelessRandomUniformIntV2.range
    'StatelessRandomUniformIntV2.range#1': 'a value where TF raises',
    'StatelessRandomUniformIntV2.range#2': 'a value where TF raises',
    # StridedSlice.len
    'StridedSlice.len#1': 'a value where TF raises',
    'StridedSlice.len#2': 'a value where TF raises',
    # StridedSlice.strides
    'StridedSlice.strides#3': "TF's class, not its text",
    'StridedSlice.strides#4': "TF's class, not its text",
    # StridedSliceGrad.shape
    'StridedSliceGrad.shape#2': "TF's class, not its text",
    'StridedSliceGrad.shape#3': "TF's class, not its text",
    'StridedSliceGrad.shape#4': "TF's class, not its text",
    'StridedSliceGrad.shape#c2': "TF's class, not its text",
    'StridedSliceGrad.shape#c4': "TF's class, not its text",
    # TensorArrayScatterV3.indices
    'TensorArrayScatterV3.indices#c3': "TF's class, not its text",
    # TensorArraySplitV3.lengths
    'TensorArraySplitV3.lengths#1': 'an error where TF gives a value',
    'TensorArraySplitV3.lengths#4': 'an error where TF gives a value',
    # TensorListFromTensor.element_shape
    'TensorListFromTensor.element_shape#2': 'a value where TF raises',
    'TensorListFromTensor.element_shape#3': 'a value where TF raises',
    # TensorListGather.element_shape
    'TensorListGather.element_shape#1': 'a value where TF raises',
    # TensorListReserve.element_shape
    'TensorListReserve.element_shape#2': 'a value where TF raises',
    # TensorListSplit.lengths
    'TensorListSplit.lengths#2': "TF's class, not its text",
    'TensorListSplit.lengths#3': "TF's class, not its text",
    'TensorListSplit.lengths#c2': "TF's class, not its text",
    'TensorListSplit.lengths#c3': "TF's class, not its text",
    # TensorListSplit.lengths_len
    'TensorListSplit.lengths_len#1': "TF's class, not its text",
    'TensorListSplit.lengths_len#2': 'a value where TF raises',
    'TensorListSplit.lengths_len#3': "TF's class, not its text",
    'TensorListSplit.lengths_len#c1': "TF's class, not its text",
    'TensorListSplit.lengths_len#c2': 'a value where TF raises',
    'TensorListSplit.lengths_len#c3': "TF's class, not its text",
    # TensorListStack.element_shape
    'TensorListStack.element_shape#2': 'a value where TF raises',
    'TensorListStack.element_shape#3': 'a value where TF raises',
    'TensorListStack.element_shape#4': 'a value where TF raises',
    # Tile.len
    'Tile.len#1': 'a value where TF raises',
    'Tile.len#2': 'a value where TF raises',
    # TopKV2.k
    'TopKV2.k#3': "TF's class, not its text",
    'TopKV2.k#4': "TF's class, not its text",
    # Transpose.len
    'Transpose.len#1': "TF's class, not its text",
    'Transpose.len#2': "TF's class, not its text",
    # UnsortedSegmentMax.num
    'UnsortedSegmentMax.num#4': "TF's class, not its text",
    # UnsortedSegmentMin.num
    'UnsortedSegmentMin.num#4': "TF's class, not its text",
    # UnsortedSegmentProd.num
    'UnsortedSegmentProd.num#4': "TF's class, not its text",
    # UnsortedSegmentSum.num
    'UnsortedSegmentSum.num#4': "TF's class, not its text",
}

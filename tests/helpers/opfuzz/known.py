"""What the op-table fuzzer still finds (``tests/test_op_fuzz.py``), by cell: how jta differs from
TensorFlow there (eagerly or under ``jta.checked``). Each is a check of TensorFlow's kernel that jta lacks
(or writes with JAX's text), or a quirk of TensorFlow's (a no-op ``Reshape`` that grappler removes, a
``BroadcastTo`` of a run-time shape that returns its input); the test fails for a cell that agrees now."""

KNOWN: dict[str, str] = {
    # AvgPool3DGrad.shape
    'AvgPool3DGrad.shape#1': 'an error where TF gives a value',
    'AvgPool3DGrad.shape#c1': 'an error where TF gives a value',
    # AvgPoolGrad.shape
    'AvgPoolGrad.shape#2': 'an error where TF gives a value',
    'AvgPoolGrad.shape#3': 'an error where TF gives a value',
    'AvgPoolGrad.shape#5': "TF's class, not its text",
    'AvgPoolGrad.shape#c2': 'an error where TF gives a value',
    'AvgPoolGrad.shape#c3': 'an error where TF gives a value',
    'AvgPoolGrad.shape#c5': 'an error where TF gives a value',
    # Bincount.size
    'Bincount.size#4': "TF's class, not its text",
    # BroadcastTo.shape
    'BroadcastTo.shape#2': 'an error where TF gives a value',
    'BroadcastTo.shape#3': 'an error where TF gives a value',
    'BroadcastTo.shape#4': 'an error where TF gives a value',
    'BroadcastTo.shape#5': 'an error where TF gives a value',
    # Conv2DBackpropFilter.sizes
    'Conv2DBackpropFilter.sizes#1': 'another exception class',
    'Conv2DBackpropFilter.sizes#3': 'another exception class',
    'Conv2DBackpropFilter.sizes#c1': 'another exception class',
    'Conv2DBackpropFilter.sizes#c3': 'another exception class',
    # Conv2DBackpropInput.sizes
    'Conv2DBackpropInput.sizes#1': 'another exception class',
    'Conv2DBackpropInput.sizes#3': 'another exception class',
    'Conv2DBackpropInput.sizes#c1': 'another exception class',
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
    'DepthwiseConv2dNativeBackpropInput.sizes#c1': 'another exception class',
    # EmptyTensorList.max
    'EmptyTensorList.max#3': 'a value where TF raises',
    # GatherV2.idx64
    'GatherV2.idx64#3': 'a value where TF raises',
    'GatherV2.idx64#4': 'a value where TF raises',
    # Reshape.shape
    'Reshape.shape#c4': 'an error where TF gives a value',
    # SparseXent.labels
    'SparseXent.labels#1': "TF's class, not its text",
    'SparseXent.labels#2': "TF's class, not its text",
    'SparseXent.labels#3': "TF's class, not its text",
    # StackV2.max_size
    'StackV2.max_size#3': "TF's class, not its text",
    'StackV2.max_size#4': "TF's class, not its text",
    'StackV2.max_size#c3': "TF's class, not its text",
    'StackV2.max_size#c4': "TF's class, not its text",
    # TensorArrayScatterV3.indices
    'TensorArrayScatterV3.indices#c3': "TF's class, not its text",
    # TensorArraySplitV3.lengths
    'TensorArraySplitV3.lengths#1': 'an error where TF gives a value',
    'TensorArraySplitV3.lengths#4': 'an error where TF gives a value',
    # TensorListReserve.element_shape
    'TensorListReserve.element_shape#2': 'a value where TF raises',
}

"""``tf.image.crop_and_resize`` and bicubic ``tf.image.resize`` through ``jta.import_function``, against TensorFlow: both methods, boxes
inside, across and outside the image, flipped, a crop of one point, integer images, extrapolation;
values eagerly and under ``jax.jit``, ``jax.grad`` against the tape (TensorFlow's boxes gradient is the
bilinear one for ``nearest`` too), the imported train step (``CropAndResizeGradImage``/``GradBoxes``),
and a box index outside the batch (``OutOfRangeError``, from compiled code too)."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from tests.helpers.compare import assert_grad_is_the_tapes  # noqa: E402

IMAGE = np.sin(np.arange(2 * 5 * 6 * 3, dtype=np.float32)).reshape(2, 5, 6, 3)
BOXES = np.array([[0.1, 0.2, 0.9, 0.8], [-0.2, 0.0, 1.2, 0.5], [0.7, 0.9, 0.2, 0.1], [0.3, 0.3, 0.6, 0.55],
                  [0.5, 0.5, 0.5, 0.5]], np.float32)
IDS = np.array([0, 1, 1, 0, 1], np.int32)
# name -> (method, crop size, extrapolation value)
CASES = {"bilinear": ("bilinear", (3, 4), 0.0), "nearest": ("nearest", (4, 3), -1.5),
         "one_point": ("bilinear", (1, 1), 0.5), "nearest_row": ("nearest", (1, 5), 0.0)}
SPECS = [tf.TensorSpec(IMAGE.shape, tf.float32), tf.TensorSpec(BOXES.shape, tf.float32),
         tf.TensorSpec(IDS.shape, tf.int32)]


def _build(name: str):
    method, crop, fill = CASES[name]
    return lambda image, boxes, ids: tf.image.crop_and_resize(image, boxes, ids, crop, method=method,
                                                              extrapolation_value=fill)


@pytest.mark.parametrize("name", [n if k == 0 else pytest.param(n, marks=pytest.mark.long_only)
                                  for k, n in enumerate(CASES)])  # (bilinear by default, all under --long)
def test_crops_and_gradients_match_tensorflow(name: str) -> None:
    build = _build(name)
    f = tf.function(build, input_signature=SPECS)
    want = f(IMAGE, BOXES, IDS).numpy()
    jax_fn, params = jta.import_function(f, IMAGE, BOXES, IDS)
    for got in (jax_fn(params, IMAGE, BOXES, IDS), jax.jit(jax_fn)(params, IMAGE, BOXES, IDS)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    weights = np.cos(np.arange(want.size, dtype=np.float32)).reshape(want.shape)
    image, boxes = tf.constant(IMAGE), tf.constant(BOXES)
    with tf.GradientTape() as tape:
        tape.watch([image, boxes])
        loss = tf.reduce_sum(weights * build(image, boxes, IDS))
    want_grads = tape.gradient(loss, [image, boxes])

    def jax_loss(image, boxes):
        return jnp.sum(weights * jax_fn(params, image, boxes, IDS))

    got_grads = jax.jit(jax.grad(jax_loss, argnums=(0, 1)))(IMAGE, BOXES)
    for got, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-5)

    @tf.function(input_signature=SPECS)
    def step(image, boxes, ids):
        with tf.GradientTape() as tape:
            tape.watch([image, boxes])
            loss = tf.reduce_sum(weights * build(image, boxes, ids))
        return [loss, *tape.gradient(loss, [image, boxes])]

    jax_step, step_params = jta.import_function(step, IMAGE, BOXES, IDS)
    for got, w in zip(jax.jit(jax_step)(step_params, IMAGE, BOXES, IDS), step(IMAGE, BOXES, IDS), strict=True):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-5)


def test_integer_image_crops_as_float() -> None:
    image = (np.arange(1 * 4 * 4 * 1) * 7 % 256).astype(np.uint8).reshape(1, 4, 4, 1)
    f = tf.function(lambda x: tf.image.crop_and_resize(x, BOXES[:2], [0, 0], [3, 3]),
                    input_signature=[tf.TensorSpec(image.shape, tf.uint8)])
    jax_fn, params = jta.import_function(f, image)
    np.testing.assert_allclose(jax_fn(params, image), f(image).numpy(), rtol=1e-6)


def test_box_index_outside_the_batch_is_tensorflows_error() -> None:
    f = tf.function(lambda image, boxes, ids: tf.image.crop_and_resize(image, boxes, ids, [2, 2]),
                    input_signature=SPECS)
    bad = np.array([0, 1, 2, 0, 1], np.int32)
    with pytest.raises(tf.errors.OutOfRangeError) as want:
        f(IMAGE, BOXES, bad)
    jax_fn, params = jta.import_function(f, IMAGE, BOXES, IDS)
    for run in (jax_fn, jta.checked(jax.jit(jax_fn))):
        with pytest.raises(jta.errors.OutOfRangeError) as got:
            run(params, IMAGE, BOXES, bad)
        assert str(got.value).split("): ", 1)[1] in str(want.value)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_crops_of_boxes_of_tenths_are_bit_exact_under_jit(method: str) -> None:
    """Boxes whose corners are tenths (from -0.1 to 1.1) sample points that fall on pixels, on the
    image's edges and on halves: XLA's fused products and reciprocals put some 1 ulp off TensorFlow's
    positions (a pixel becomes the extrapolation value); jta's crops equal TensorFlow's bit for bit."""
    tenths = np.arange(-1, 12, dtype=np.float32) / np.float32(10)
    corners = np.stack(np.meshgrid(tenths, tenths), -1).reshape(-1, 2)
    boxes = np.concatenate([corners, corners[::-1]], axis=1)  # (y1, x1, y2, x2): flipped boxes too
    image = np.cos(np.arange(7 * 9, dtype=np.float32)).reshape(1, 7, 9, 1)
    ids = np.zeros(len(boxes), np.int32)
    for crop in ((4, 5), (1, 7)):
        f = tf.function(lambda i, b, k, crop=crop: tf.image.crop_and_resize(i, b, k, crop, method=method,
                                                                           extrapolation_value=-9.0))
        jax_fn, params = jta.import_function(f, image, boxes, ids)
        np.testing.assert_array_equal(jax.jit(jax_fn)(params, image, boxes, ids), f(image, boxes, ids).numpy())


# (size, align_corners, half_pixel_centers): tf.image.resize's (half-pixel) and tf.compat.v1's
BICUBIC = [((5, 7), False, True), ((2, 9), False, False), ((7, 3), True, False), ((1, 1), False, True)]


@pytest.mark.parametrize("size, align, half", [c if k == 1 else pytest.param(*c, marks=pytest.mark.long_only)
                                               for k, c in enumerate(BICUBIC)])  # (the legacy kernel by default)
def test_bicubic_resize_matches_tensorflow(size, align: bool, half: bool) -> None:
    """Values bit for bit (TensorFlow's weight table and order of sums), under ``jit``; ``jax.grad``
    against the tape and the imported train step (``ResizeBicubicGrad``)."""
    build = lambda x: tf.raw_ops.ResizeBicubic(images=x, size=size, align_corners=align,  # noqa: E731
                                                half_pixel_centers=half)
    f = tf.function(build, input_signature=[tf.TensorSpec(IMAGE.shape, tf.float32)])
    jax_fn, params = jta.import_function(f, IMAGE)
    want = f(IMAGE).numpy()
    np.testing.assert_array_equal(jax.jit(jax_fn)(params, IMAGE), want)
    weights = np.cos(np.arange(want.size, dtype=np.float32)).reshape(want.shape)

    @tf.function(input_signature=[tf.TensorSpec(IMAGE.shape, tf.float32)])
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(weights * build(x))
        return tape.gradient(loss, x)

    jax_step, step_params = jta.import_function(step, IMAGE)
    assert_grad_is_the_tapes(build, jax_fn, params, IMAGE, atol=1e-5)
    np.testing.assert_allclose(jax.jit(jax_step)(step_params, IMAGE), step(IMAGE).numpy(), rtol=1e-5, atol=1e-5)


# (ksizes, strides, rates, padding)
PATCHES = [([1, 2, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"), ([1, 2, 3, 1], [1, 2, 2, 1], [1, 2, 1, 1], "SAME"),
           ([1, 7, 3, 1], [1, 3, 3, 1], [1, 1, 1, 1], "VALID"), ([1, 3, 2, 1], [1, 1, 3, 1], [1, 1, 2, 1], "SAME")]


@pytest.mark.parametrize("sizes, strides, rates, padding", [c if k % 2 else pytest.param(*c, marks=pytest.mark.long_only)
                                                            for k, c in enumerate(PATCHES)])
def test_extract_patches_matches_tensorflow(sizes, strides, rates, padding) -> None:
    """Values under ``jit`` (row, column, depth order; ``SAME``'s zero padding, the smaller half before;
    a window larger than the image: no patches) and ``jax.grad`` against the tape."""
    build = lambda x: tf.image.extract_patches(x, sizes, strides, rates, padding)  # noqa: E731
    f = tf.function(build, input_signature=[tf.TensorSpec(IMAGE.shape, tf.float32)])
    jax_fn, params = jta.import_function(f, IMAGE)
    want = f(IMAGE).numpy()
    np.testing.assert_array_equal(jax.jit(jax_fn)(params, IMAGE), want)
    assert_grad_is_the_tapes(build, jax_fn, params, IMAGE)


def _boxes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes on a grid of quarters (exact overlaps of 1/3, 1/2: at the thresholds), some flipped, some
    empty, and scores with ties."""
    rng = np.random.default_rng(seed)
    corners = rng.integers(0, 5, size=(n, 4)).astype(np.float32) / np.float32(4)
    return corners, (rng.integers(0, 6, size=n) / 5).astype(np.float32)


# name -> (function of (boxes, scores), (iou, score thresholds))
NMS = {
    "v3": lambda b, s: tf.image.non_max_suppression(b, s, 7, 1 / 3, 0.2),
    "v3_half": lambda b, s: tf.image.non_max_suppression(b, s, 20, 0.5),
    "v5_scores": lambda b, s: list(tf.image.non_max_suppression_with_scores(b, s, 6, 0.5, 0.1)),
    "v4_padded": lambda b, s: list(tf.raw_ops.NonMaxSuppressionV4(boxes=b, scores=s, max_output_size=9,
                                                                  iou_threshold=0.4, score_threshold=0.0,
                                                                  pad_to_max_output_size=True)),
}


@pytest.mark.parametrize("name", [n if n in ("v3_half", "v4_padded") else pytest.param(n, marks=pytest.mark.long_only)
                                  for n in NMS])  # (a learned count and a padded one by default)
def test_non_max_suppression_matches_tensorflow(name: str) -> None:
    """Eagerly and under ``jta.checked`` (the count is the data's; padded: under a bare ``jit`` too), for
    three sets of 40 boxes."""
    f = tf.function(NMS[name], input_signature=[tf.TensorSpec([40, 4], tf.float32), tf.TensorSpec([40], tf.float32)])
    jax_fn, params = jta.import_function(f, *_boxes(40, 0))
    runs = [jax_fn, jta.checked(jax.jit(jax_fn))] + ([jax.jit(jax_fn)] if name == "v4_padded" else [])
    for seed in range(3):
        boxes, scores = _boxes(40, seed)
        want = [np.asarray(w) for w in tf.nest.flatten(f(boxes, scores))]
        for run in runs:
            got = [np.asarray(g) for g in jax.tree_util.tree_leaves(run(params, boxes, scores))]
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)

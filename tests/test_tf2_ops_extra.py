"""Special functions, matrix square roots, morphology, image color ops, resizes and combined non-max
suppression of ``jta.import_function``, against TensorFlow: ``Ndtri``, the incomplete gamma functions with
their gradient ops (``IgammaGradA``, ``RandomGammaGrad``) at the edges of their domain, ``Polygamma``'s
gradient, ``MatrixSquareRoot``, ``Dilation2D`` (``tf.nn.dilation2d``, ``tf.nn.erosion2d``) with its
backprop ops, the color ops (``RGBToHSV``, ``HSVToRGB``, ``AdjustContrastv2``, ``AdjustSaturation``,
``AdjustHue``), ``ResizeArea``, ``ScaleAndTranslate`` with ``ScaleAndTranslateGrad``, and
``CombinedNonMaxSuppression``.

Each program is compared with TensorFlow's own call eagerly and under ``jax.jit`` (bit for bit where
TensorFlow's kernel is simple enough to follow: the morphology, color, resize and suppression ops; the
special functions and ``sqrtm`` within the tolerance each test states); where TensorFlow has a gradient,
``jax.grad`` of the imported function matches the ``GradientTape``'s, and the imported train step (the
tape inside the ``tf.function``: TensorFlow's gradient ops) matches too. Heavier cases run under ``--long``.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from tests.helpers.tf2_steps import op_types, tape_step  # noqa: E402

RNG = np.random.default_rng(7)


def _spec(a: np.ndarray) -> Any:
    return tf.TensorSpec(a.shape, tf.as_dtype(a.dtype))


def _close(got: Any, want: Any, rtol: float, atol: float, what: str) -> None:
    leaves, ref = jax.tree_util.tree_leaves(got), [np.asarray(x) for x in tf.nest.flatten(want)]
    assert len(leaves) == len(ref), what
    for a, b in zip(leaves, ref, strict=True):
        a = np.asarray(a)
        assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
        if rtol == atol == 0:
            np.testing.assert_array_equal(a, b, err_msg=what)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _check(build: Any, *args: np.ndarray, rtol: float = 1e-6, atol: float = 1e-6, wrt: tuple[int, ...] = (0,),
           grad_tol: Optional[float] = None, ops: tuple[str, ...] = ()) -> None:
    """``build``'s tf.function against TensorFlow eagerly and under ``jit`` (``rtol = atol = 0``: bit for
    bit); with ``wrt``, ``jax.grad`` of a weighted sum of its output with respect to those arguments
    against the tape's, and the imported train step, whose graph holds the op types ``ops``."""
    f = tf.function(build, input_signature=[_spec(a) for a in args])
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    _close(fn(params, *args), want, rtol, atol, "eager")
    _close(jax.jit(fn)(params, *args), want, rtol, atol, "jit")
    if not wrt:
        return
    tol = grad_tol if grad_tol is not None else max(rtol, atol, 1e-6)
    weights = np.cos(np.arange(np.size(want), dtype=np.float32)).reshape(np.shape(want)).astype(want.dtype.as_numpy_dtype)

    def loss(*xs: Any) -> Any:
        return tf.reduce_sum(weights * build(*xs))

    watched = [tf.constant(args[k]) for k in wrt]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        value = loss(*[watched[wrt.index(k)] if k in wrt else a for k, a in enumerate(args)])
    tape_grads = [g.numpy() for g in tape.gradient(value, watched)]

    def jax_loss(*xs: Any) -> Any:
        return jnp.sum(weights * fn(params, *xs))

    got = jax.jit(jax.grad(jax_loss, argnums=wrt))(*args)
    _close(list(got), tape_grads, tol, tol, "jax.grad")

    step = tape_step(loss, args, wrt)
    found = op_types(step)
    assert set(ops) <= found, sorted(set(ops) - found)
    jax_step, step_params = jta.import_function(step, *args)
    _close(jax.jit(jax_step)(step_params, *args), step(*args), tol, tol, "train step")


# -- special functions ----------------------------------------------------------------------------------
def test_ndtri_matches_tensorflow() -> None:
    """Eigen's Cephes port and JAX's differ by a few ulp (Eigen's own ``log``); ±inf at 0 and 1, NaN
    outside; the gradient is TensorFlow's ``sqrt(2 pi) exp(y**2 / 2)``."""
    p = np.concatenate([np.linspace(0.0, 1.0, 41, dtype=np.float32), np.float32([1e-30, 1e-10, 0.999, -0.5, 1.5])])
    _check(tf.math.ndtri, p, rtol=2e-6, atol=0, wrt=())
    inside = np.float32([1e-6, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1 - 1e-6])
    _check(tf.math.ndtri, inside, rtol=2e-6, atol=0, grad_tol=1e-5)


# every pair of: outside the domain, its edges (0, -0, +inf, NaN) and inside
EDGES = np.float32([-1.0, 0.0, -0.0, 0.5, 1.0, 3.0, np.inf, np.nan])
EDGE_A, EDGE_X = (g.ravel().copy() for g in np.meshgrid(EDGES, EDGES, indexing="ij"))


@pytest.mark.parametrize("op", ["Igamma", "IgammaGradA", pytest.param("Igammac", marks=pytest.mark.long_only),
                                pytest.param("RandomGammaGrad", marks=pytest.mark.long_only)])
def test_incomplete_gamma_ops_have_tensorflows_values_at_the_domains_edges(op: str) -> None:
    """Eigen's prelude: ``P(a, 0) = 0`` for any ``a``, NaN for ``a <= 0`` (JAX: SciPy's ``P(0, x) = 1``),
    the limits at ``a`` or ``x`` infinite (JAX: NaN)."""
    names = ("alpha", "sample") if op == "RandomGammaGrad" else ("a", "x")
    _check(lambda a, x: getattr(tf.raw_ops, op)(**dict(zip(names, (a, x), strict=True))), EDGE_A, EDGE_X,
           rtol=1e-6, atol=1e-7, wrt=())


@pytest.mark.parametrize("op", [tf.math.igamma, pytest.param(tf.math.igammac, marks=pytest.mark.long_only)])
def test_incomplete_gamma_differentiates_as_tensorflow(op: Any) -> None:
    """``a`` through ``IgammaGradA`` (the train step imports it), ``x`` through TensorFlow's log-space
    formula; broadcast ``a`` gets the sum."""
    a = np.float32([[0.5], [2.0], [7.5]])
    x = np.float32([0.2, 1.0, 3.0, 9.0])
    _check(op, a, x, rtol=2e-6, atol=1e-6, wrt=(0, 1), grad_tol=2e-5, ops=("IgammaGradA",))


def test_polygamma_differentiates_in_x_only() -> None:
    """TensorFlow's gradient of the order ``n`` is None (JAX's refuses one): here zero."""
    n = np.float32([0.0, 1.0, 2.0, 3.0])
    x = np.float32([0.5, 1.5, 2.0, 4.0])
    f = tf.function(tf.math.polygamma, input_signature=[_spec(n), _spec(x)])
    fn, params = jta.import_function(f, n, x)
    np.testing.assert_allclose(fn(params, n, x), f(n, x).numpy(), rtol=1e-5)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        value = tf.reduce_sum(tf.math.polygamma(n, xt))
    gn, gx = jax.jit(jax.grad(lambda n, x: jnp.sum(fn(params, n, x)), argnums=(0, 1)))(n, x)
    np.testing.assert_array_equal(gn, np.zeros(4, np.float32))
    np.testing.assert_allclose(gx, tape.gradient(value, xt).numpy(), rtol=1e-5)


# -- the matrix square root ---------------------------------------------------------------------------
def _spd(n: int, *batch: int) -> np.ndarray:
    a = RNG.normal(size=(*batch, n, n)).astype(np.float32)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


@pytest.mark.parametrize("name", [pytest.param("batch", marks=pytest.mark.long_only), "rotation"])
def test_matrix_square_root_matches_tensorflow(name: str) -> None:
    """A batch of symmetric positive definite matrices, and one with complex eigenvalues (a rotation and
    scaling: Eigen's 2x2 block); values, ``jax.grad`` and the train step (the Sylvester equation)."""
    a = _spd(3, 2) if name == "batch" else np.float32([[1.0, -2.0, 0.5], [2.0, 1.0, 0.0], [0.0, 0.3, 4.0]])
    _check(tf.linalg.sqrtm, a, rtol=2e-5, atol=2e-5, grad_tol=1e-4)


def test_matrix_square_root_of_a_negative_eigenvalue_is_nan() -> None:
    """Eigen's real Schur method takes the square root of the negative 1x1 block: NaN everywhere."""
    a = np.float32([[-1.0, 0.5], [0.0, 4.0]])
    _check(tf.linalg.sqrtm, np.stack([a, _spd(2)]), wrt=(), rtol=2e-5, atol=2e-5)


def test_matrix_square_root_of_a_non_square_matrix_is_tensorflows_error() -> None:
    a = np.ones((2, 3), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Input matrix must be square"):
        tf.linalg.sqrtm(a)
    f = tf.function(tf.linalg.sqrtm, input_signature=[tf.TensorSpec([2, None], tf.float32)])
    fn, params = jta.import_function(f, a)
    with pytest.raises(jta.errors.InvalidArgumentError, match="Input matrix must be square"):
        fn(params, a)


# -- morphology -----------------------------------------------------------------------------------------
# (input shape, filter shape, strides, rates, padding)
DILATIONS = {"same": ((2, 6, 7, 3), (3, 2, 3), (1, 1), (1, 1), "SAME"),
             "strided_rated": ((1, 9, 8, 2), (2, 3, 2), (2, 3), (2, 1), "VALID"),
             "same_strided_rated": ((1, 5, 6, 1), (3, 3, 1), (2, 1), (2, 3), "SAME"),
             "no_tap_inside": ((1, 1, 2, 1), (2, 1, 1), (1, 1), (3, 1), "SAME")}


def _dilation(name: str, erosion: bool) -> Any:
    _, _, strides, rates, padding = DILATIONS[name]
    op = tf.nn.erosion2d if erosion else tf.nn.dilation2d
    return lambda x, f: op(x, f, (1, *strides, 1), padding, "NHWC", (1, *rates, 1))


@pytest.mark.parametrize("name, erosion", [pytest.param("strided_rated", True, marks=pytest.mark.long_only),
                                           ("no_tap_inside", False),
                                           pytest.param("same", False, marks=pytest.mark.long_only),
                                           pytest.param("same_strided_rated", False, marks=pytest.mark.long_only),
                                           pytest.param("same", True, marks=pytest.mark.long_only)])
def test_dilation_matches_tensorflow(name: str, erosion: bool) -> None:
    """Values bit for bit; the gradient (``jax.grad``, and the train step's ``Dilation2DBackpropInput`` /
    ``Filter``) goes to the first largest tap in row-major order: integer-valued inputs tie often. A
    window with no tap inside the image is ``lowest()``, its gradient TensorFlow's (the window's first
    pixel, clamped, and the filter's first entry)."""
    shape, filter_shape = DILATIONS[name][:2]
    x = RNG.integers(-3, 4, size=shape).astype(np.float32)
    f = RNG.integers(-2, 3, size=filter_shape).astype(np.float32)
    _check(_dilation(name, erosion), x, f, rtol=0, atol=0, wrt=(0, 1), grad_tol=1e-5,
           ops=("Dilation2DBackpropInput", "Dilation2DBackpropFilter"))


def test_dilation_of_a_bad_filter_is_tensorflows_error() -> None:
    x, f = np.ones((1, 4, 4, 2), np.float32), np.ones((2, 2, 3), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="same depth: 2 vs 3"):
        tf.nn.dilation2d(x, f, (1, 1, 1, 1), "VALID", "NHWC", (1, 1, 1, 1))
    g = tf.function(_dilation("same", False), input_signature=[_spec(x), tf.TensorSpec([2, 2, None], tf.float32)])
    fn, params = jta.import_function(g, x, f)
    with pytest.raises(jta.errors.InvalidArgumentError, match="same depth: 2 vs 3"):
        fn(params, x, f)


# -- color -------------------------------------------------------------------------------------------------
def _image() -> np.ndarray:
    """Pixels in [0, 1): random ones, ties of two or three channels (quarters), gray and black ones."""
    x = RNG.uniform(0.0, 1.0, size=(2, 16, 16, 3)).astype(np.float32)
    x[0, :6] = np.round(x[0, :6] * 4) / 4
    x[1, :2, :4] = 0.5
    x[1, 2, :4] = 0.0
    return x


COLOR = {"rgb_to_hsv": tf.image.rgb_to_hsv, "contrast": lambda x: tf.image.adjust_contrast(x, 1.7),
         "contrast_negative": lambda x: tf.image.adjust_contrast(x, -0.3),
         "saturation": lambda x: tf.image.adjust_saturation(x, 1.6),
         "desaturation": lambda x: tf.image.adjust_saturation(x, 0.3),
         "hue": lambda x: tf.image.adjust_hue(x, 0.37), "hue_negative": lambda x: tf.image.adjust_hue(x, -0.81)}


@pytest.mark.parametrize("name", [n if n in ("rgb_to_hsv", "contrast_negative", "desaturation", "hue_negative")
                                  else pytest.param(n, marks=pytest.mark.long_only) for n in COLOR])
def test_color_ops_are_tensorflows_bit_for_bit(name: str) -> None:
    """The kernels' order of operations and roundings: XLA's fused products, the saturation kernel's hue
    offset added in double, the contrast mean's folded sum. ``RGBToHSV``'s gradient is TensorFlow's
    piecewise formula (the ties of quarters pick its cases); the adjustments have none in TensorFlow."""
    _check(COLOR[name], _image(), rtol=0, atol=0, wrt=(0,) if name == "rgb_to_hsv" else (), grad_tol=1e-5)


def test_hsv_to_rgb_is_tensorflows_and_not_differentiable() -> None:
    hsv = tf.image.rgb_to_hsv(_image()).numpy()
    hsv[0, 0, :3, 0] = [0.0, 1.0, 0.999999]  # (hue 1: TensorFlow's triangles, not a wrap)
    _check(tf.image.hsv_to_rgb, hsv, rtol=0, atol=0, wrt=())
    f = tf.function(tf.image.hsv_to_rgb, input_signature=[_spec(hsv)])
    fn, params = jta.import_function(f, hsv)
    value = tf.constant(hsv)
    with tf.GradientTape() as tape:
        tape.watch(value)
        total = tf.reduce_sum(tf.image.hsv_to_rgb(value))
    assert tape.gradient(total, value) is None  # (ops.NotDifferentiable)
    np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(fn(params, x)))(hsv), np.zeros_like(hsv))


def test_color_op_of_four_channels_is_tensorflows_error() -> None:
    x = np.ones((2, 2, 4), np.float32)
    with pytest.raises(tf.errors.FailedPreconditionError, match="input must have 3 channels but input only has 4"):
        tf.image.rgb_to_hsv(x)
    g = tf.function(tf.image.rgb_to_hsv, input_signature=[tf.TensorSpec([2, 2, None])])
    fn, params = jta.import_function(g, x)
    with pytest.raises(jta.errors.FailedPreconditionError, match="input must have 3 channels but input only has 4"):
        fn(params, x)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input must have 3 channels but instead has 4"):
        tf.image.adjust_saturation(x, 0.5)
    f = tf.function(lambda x: tf.image.adjust_saturation(x, 0.5), input_signature=[tf.TensorSpec([2, 2, None])])
    fn, params = jta.import_function(f, x)
    with pytest.raises(jta.errors.InvalidArgumentError, match="input must have 3 channels but instead has 4"):
        fn(params, x)


# -- resizes ---------------------------------------------------------------------------------------------
# (input shape, size, align_corners): down, up, both, align_corners (tf.compat.v1), four channels
AREA = [((2, 9, 11, 3), (4, 5), False), ((1, 7, 6, 2), (10, 13), False), ((1, 13, 17, 3), (7, 6), False),
        ((1, 8, 8, 1), (3, 3), True), ((1, 5, 7, 4), (5, 3), False)]


@pytest.mark.parametrize("shape, size, align", [c if k < 1 else pytest.param(*c, marks=pytest.mark.long_only)
                                                for k, c in enumerate(AREA)])
def test_area_resize_is_tensorflows_bit_for_bit(shape, size, align: bool) -> None:
    """TensorFlow's float32 coverage weights and order of sums (TensorFlow has no gradient of it)."""
    x = RNG.normal(size=shape).astype(np.float32)
    _check(lambda i: tf.compat.v1.image.resize_area(i, size, align_corners=align), x, rtol=0, atol=0, wrt=())


@pytest.mark.long_only  # (the float area resize keeps the class)
def test_area_resize_of_an_integer_image() -> None:
    x = RNG.integers(0, 256, size=(1, 6, 9, 3)).astype(np.uint8)
    _check(lambda i: tf.image.resize(i, (4, 4), method="area"), x, rtol=0, atol=0, wrt=())


# (method, size, antialias): ScaleAndTranslate's kernels through tf.image.resize (bilinear and bicubic with
# antialias are its triangle and Keys cubic kernels)
SCALED = [("lanczos3", (14, 17), True), ("mitchellcubic", (4, 5), True), ("lanczos5", (4, 5), False),
          ("gaussian", (4, 5), True), ("bilinear", (4, 5), True), ("bicubic", (9, 4), True)]


@pytest.mark.parametrize("method, size, antialias", [c if k < 1 else pytest.param(*c, marks=pytest.mark.long_only)
                                                     for k, c in enumerate(SCALED)])
def test_scale_and_translate_resizes_are_tensorflows_bit_for_bit(method: str, size, antialias: bool) -> None:
    """TensorFlow's float32 span weights (``sinf`` as the C library computes it) and order of sums, rows
    then columns; the gradient (``jax.grad`` and the train step's ``ScaleAndTranslateGrad``) through the
    transposed spans."""
    x = RNG.normal(size=(2, 9, 11, 3)).astype(np.float32)
    _check(lambda i: tf.image.resize(i, size, method=method, antialias=antialias), x, rtol=0, atol=0, wrt=(0,),
           grad_tol=1e-5, ops=("ScaleAndTranslateGrad",))


@pytest.mark.parametrize("kernel", [pytest.param("box", marks=pytest.mark.long_only),
                                    pytest.param("lanczos1", marks=pytest.mark.long_only),
                                    pytest.param("keyscubic", marks=pytest.mark.long_only)])
def test_scale_and_translate_with_a_translation(kernel: str) -> None:
    """A translation moves samples outside the image (their outputs 0) and an integer image."""
    x = RNG.integers(0, 256, size=(1, 7, 8, 2)).astype(np.uint8)
    _check(lambda i: tf.raw_ops.ScaleAndTranslate(images=i, size=[6, 9], scale=[0.7, 1.3], translation=[0.5, -1.2],
                                                  kernel_type=kernel, antialias=True), x, rtol=0, atol=0, wrt=())
    y = x.astype(np.float32)
    _check(lambda i: tf.raw_ops.ScaleAndTranslate(images=i, size=[6, 9], scale=[0.7, 1.3], translation=[0.5, -1.2],
                                                  kernel_type=kernel, antialias=False), y, rtol=0, atol=0,
           grad_tol=1e-5, ops=("ScaleAndTranslateGrad",))


# -- combined non-max suppression ------------------------------------------------------------------------
def _detections(q: int) -> tuple[np.ndarray, np.ndarray]:
    """Two images of 12 boxes (clusters that overlap, some past the image's edge), 3 classes; distinct scores."""
    corners = RNG.uniform(-0.1, 0.9, size=(2, 12, q, 2)).astype(np.float32)
    sizes = RNG.uniform(0.05, 0.4, size=(2, 12, q, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + sizes], -1)
    boxes[:, 6:] = boxes[:, :6] + np.float32(0.02)  # (near copies: suppressed)
    scores = RNG.permutation(2 * 12 * 3).reshape(2, 12, 3).astype(np.float32) / np.float32(72)
    return boxes.astype(np.float32), scores


@pytest.mark.parametrize("q, per_class, total, pad, clip", [
    pytest.param(3, 3, 20, True, True, marks=pytest.mark.long_only),
    pytest.param(1, 4, 7, False, True, marks=pytest.mark.long_only),
    pytest.param(3, 5, 6, False, False, marks=pytest.mark.long_only),
    pytest.param(1, 20, 50, True, True, marks=pytest.mark.long_only)])
def test_combined_non_max_suppression_matches_tensorflow(q: int, per_class: int, total: int, pad: bool,
                                                        clip: bool) -> None:
    boxes, scores = _detections(q)
    iou, threshold = np.float32(0.4), np.float32(0.1)

    def build(b: Any, s: Any, iou: Any, threshold: Any) -> Any:
        return tf.image.combined_non_max_suppression(b, s, per_class, total, iou, threshold, pad_per_class=pad,
                                                     clip_boxes=clip)

    _check(build, boxes, scores, iou, threshold, rtol=0, atol=0, wrt=())


def test_combined_non_max_suppression_of_a_bad_size_is_tensorflows_error() -> None:
    boxes, scores = _detections(1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_total_size must be > 0"):
        tf.image.combined_non_max_suppression(boxes, scores, 3, 0)
    f = tf.function(lambda b, s, t: tf.image.combined_non_max_suppression(b, s, 3, t))
    fn, params = jta.import_function(f, boxes, scores, np.int32(0))
    with pytest.raises(jta.errors.InvalidArgumentError, match="max_total_size must be > 0"):
        fn(params, boxes, scores, np.int32(0))


# -- projective transforms: Keras's RandomRotation, RandomZoom, RandomTranslation ---------------------
_MODES = [(i, m) for i in ("NEAREST", "BILINEAR") for m in ("CONSTANT", "REFLECT", "WRAP", "NEAREST")]


@pytest.mark.parametrize("interpolation, mode", [
    m if m == ("BILINEAR", "REFLECT") else pytest.param(*m, marks=pytest.mark.long_only)
    for m in _MODES])
def test_projective_transform_is_tensorflows_bit_for_bit(interpolation: str, mode: str) -> None:
    """Each interpolation and fill mode, an output of the input's shape and of another, a perspective
    transform and an affine one: values bit for bit, and ``jax.grad`` TensorFlow's registered gradient (the
    cotangent through the inverse transforms)."""
    rng = np.random.default_rng(3)
    images = rng.normal(size=(2, 7, 9, 3)).astype(np.float32)
    transforms = np.array([[0.9, -0.3, 1.2, 0.25, 1.1, -2.0, 0.01, -0.02],
                           [1.3, 0.2, -3.5, -0.1, 0.8, 4.0, 0.0, 0.0]], np.float32)
    for shape in ([7, 9], [5, 11]):
        f = tf.function(lambda x, t, shape=shape: tf.raw_ops.ImageProjectiveTransformV3(
            images=x, transforms=t, output_shape=shape, fill_value=0.5, interpolation=interpolation,
            fill_mode=mode), input_signature=[tf.TensorSpec(images.shape), tf.TensorSpec(transforms.shape)])
        fn, params = jta.import_function(f, images, transforms)
        want = f(images, transforms).numpy()
        np.testing.assert_array_equal(jax.jit(fn)(params, images, transforms), want)
        w = rng.normal(size=want.shape).astype(np.float32)
        got = jax.jit(jax.grad(lambda x, w=w, fn=fn, params=params: jnp.sum(fn(params, x, transforms) * w)))(images)
        x = tf.constant(images)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(f(x, transforms) * w)
        np.testing.assert_allclose(got, tape.gradient(loss, x), rtol=1e-4, atol=1e-5)


@pytest.mark.long_only  # (about 4 s)
def test_keras_augmentation_layers_in_training() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras 3 runs on another backend")
    model = keras.Sequential([keras.layers.RandomRotation(0.2, seed=1), keras.layers.RandomZoom(0.2, seed=2),
                              keras.layers.RandomTranslation(0.1, 0.1, seed=3)])
    images = np.random.default_rng(0).uniform(size=(2, 8, 8, 3)).astype(np.float32)
    f = tf.function(lambda x: model(x, training=True), input_signature=[tf.TensorSpec(images.shape)])
    fn, params = jta.import_function(f, images, with_updates=True)
    run = jax.jit(fn)
    for _ in range(2):  # (the seed generators' states advance)
        out, params = run(params, images)
        np.testing.assert_allclose(out, f(images), rtol=1e-5, atol=1e-6)


@pytest.mark.long_only  # (3 s; the gradient sweep's Diag and Cross cases run under --long too)
def test_tensor_diag_and_cross_products() -> None:
    """``tf.linalg.tensor_diag`` (TensorFlow's gradient of ``tensor_diag_part`` too) and ``tf.linalg.cross``:
    values, the train steps, and TensorFlow's errors (a cross product of 4-vectors is its
    ``FailedPreconditionError``)."""
    x, a, b = RNG.normal(size=(2, 3)).astype(np.float32), *RNG.normal(size=(2, 4, 3)).astype(np.float32)
    _check(lambda v: tf.linalg.tensor_diag(v) * 2.0, x)
    _check(lambda v: tf.linalg.tensor_diag_part(tf.einsum("ij,kl->ijkl", v, v)), x)
    _check(lambda u, v: tf.linalg.cross(u, v), a, b, wrt=(0, 1), grad_tol=1e-5)
    f = tf.function(tf.linalg.cross, input_signature=[tf.TensorSpec([2, None])] * 2)
    fn, params = jta.import_function(f, np.ones((2, 4), np.float32), np.ones((2, 4), np.float32))
    with pytest.raises(jta.errors.FailedPreconditionError, match="only defined for 3-element vectors"):
        fn(params, np.ones((2, 4), np.float32), np.ones((2, 4), np.float32))

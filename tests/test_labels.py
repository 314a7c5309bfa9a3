"""labels.encode gives np.unique(y, return_inverse=True)'s answer on every kind of label vector."""

import numpy as np
import pytest

from maxmargin import labels

RNG = np.random.default_rng(0)
CASES = {
    "two floats": RNG.choice([-1.0, 1.0], 5000),
    "two int32": RNG.choice([0, 1], 1000).astype(np.int32),
    "ten integer-valued floats": RNG.integers(0, 10, 2000).astype(float),
    "signed ints with gaps": RNG.integers(-5, 300, 5000)[RNG.integers(-5, 300, 5000) % 7 != 0],
    "float32": RNG.integers(0, 3, 100).astype(np.float32),
    "fractional floats": np.array([3.5, 1.2, 3.5, 0.25]),
    "nan": np.array([2.0, np.nan, 1.0]),
    "large float32 integers": np.array([1e8, 1e8 + 8, 1e8 + 16, 1e8], np.float32),
    "wide range": RNG.integers(0, 2**40, 100),
    "one label": np.array([7, 7, 7]),
    "two fractional": RNG.choice([0.5, 2.0], 40),
    "huge uint64": np.array([1, 2**63 + 5, 3], dtype=np.uint64),
    "uint8": RNG.integers(0, 4, 100).astype(np.uint8),
    "signed zeros": np.array([-0.0, 0.0, 1.0, 2.0]),
    "strings": np.array(["b", "a", "c", "a"]),
    "two strings": RNG.choice(np.array(["spam", "ham"]), 3000),
    "eight strings": RNG.choice(np.array([f"class {i}" for i in range(8)]), 3000),
    "nine strings (np.unique)": RNG.choice(np.array([f"c{i}" for i in range(9)]), 3000),
    "one string": np.array(["only"] * 4),
    "bytes": np.array([b"q", b"p", b"q", b""]),
    "prefixes and unicode": np.array(["ab", "a", "", "\u00e9t\u00e9", "a", "ab"]),
    "odd-width bytes": np.array([b"abc", b"ab", b"a", b"abc"]),
    "strided strings": RNG.choice(np.array(["left", "right", "up"]), 3000)[::3],
    "NUL inside": np.array(["a\x00b", "a", "a\x00b", "ab"]),
    "object strings (pandas)": RNG.choice(np.array(["spam", "ham", "eggs"], dtype=object), 3000),
    "object strings and np.str_": np.array([np.str_("b"), "a", "b"], dtype=object),
    "nine object strings (np.unique)": RNG.choice(np.array([f"c{i}" for i in range(9)], dtype=object), 300),
    "object integers (np.unique)": np.array([3, 1, 3], dtype=object),
    "bools": np.array([True, False, True]),
    "empty": np.array([], dtype=float),
    "infinite": np.array([1.0, np.inf, 1.0]),
    # the compiled two-label scan (labels._two_scan) and where it hands over to the other paths
    "two int64 extremes": np.array([2**63 - 1, -(2**63), 2**63 - 1]),
    "two float32": RNG.choice(np.array([-3.5, 7.25], np.float32), 500),
    "two, NaN first": np.array([np.nan, 1.0, 2.0, 1.0]),
    "two, NaN last": np.array([1.0, 2.0, 1.0, np.nan]),
    "two infinities": np.array([np.inf, -np.inf, np.inf]),
    "finite and infinite": np.array([2.0, -np.inf, 2.0]),
    "two strided": RNG.choice([-1.0, 1.0], 3001)[::3],
    "the second label late": np.r_[np.full(999, 4), 9],
    "three where two are expected": np.r_[RNG.choice([0, 1], 999), 2],
    "two zeros and one": np.array([0.0, -0.0, 1.0, -0.0]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_encode_is_np_unique(name):
    y = CASES[name]
    classes, idx = labels.encode(y)
    ref_classes, ref_idx = np.unique(y, return_inverse=True)
    assert classes.dtype == ref_classes.dtype and idx.dtype == ref_idx.dtype
    np.testing.assert_array_equal(classes, ref_classes)
    np.testing.assert_array_equal(idx, ref_idx)
    assert idx.shape == y.shape


@pytest.mark.parametrize("name", ["two floats", "ten integer-valued floats", "strings", "eight strings", "one label"])
@pytest.mark.parametrize("weighted", [False, True])
def test_class_weights_are_compute_class_weights(name, weighted):
    """labels.class_weights gives scikit-learn's compute_class_weight bit for bit ('balanced' is computed here;
    None and dicts as scikit-learn)."""
    from sklearn.utils.class_weight import compute_class_weight

    y = CASES[name]
    classes, idx = labels.encode(y)
    sw = np.random.default_rng(1).uniform(0.1, 3.0, y.shape[0]) if weighted else None
    dicts = [{c.item(): 1.5 + i for i, c in enumerate(classes)}]
    for cw in ["balanced", None, *dicts]:
        ours = labels.class_weights(cw, classes, y, idx, sw)
        theirs = (
            np.ones(classes.shape[0])
            if cw is None
            else compute_class_weight(cw, classes=classes, y=y, sample_weight=sw)
        )
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    "y", [np.array(["a", 1], dtype=object), np.array(["a", None], dtype=object), np.array([np.nan, "a"], dtype=object)]
)
def test_encode_of_mixed_objects_fails_as_np_unique(y):
    """Objects that do not order (a string beside a number or None): the error ``np.unique`` raises."""
    with pytest.raises(TypeError):
        np.unique(y, return_inverse=True)
    with pytest.raises(TypeError):
        labels.encode(y)


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_one_vs_rest_is_the_numpy_arithmetic(k, weighted):
    """``one_vs_rest``'s one pass gives the targets and costs the NumPy expressions it replaced, bit for bit."""
    rng = np.random.default_rng(k)
    y_idx = rng.integers(0, k, size=500).astype(np.intp)
    sw = rng.random(500) * 3.0 if weighted else None
    cw = rng.random(k) + 0.5
    C = 0.7
    for m in [1] if k == 2 else range(k):
        yb, Ci = labels.one_vs_rest(y_idx, m, C, sw, cw)
        pos = y_idx == m
        s = np.ones(500) if sw is None else sw
        want = C * s * cw[y_idx] if k == 2 else C * s * np.where(pos, cw[m], 1.0)
        np.testing.assert_array_equal(yb, np.where(pos, 1.0, -1.0))
        np.testing.assert_array_equal(Ci, want)


def test_class_weights_none_is_shared_read_only_ones():
    classes = np.array([0, 1, 2])
    cw = labels.class_weights(None, classes, None, np.zeros(3, dtype=np.intp))
    np.testing.assert_array_equal(cw, np.ones(3))
    assert not cw.flags.writeable
    assert labels.class_weights(None, classes, None, np.zeros(3, dtype=np.intp)) is cw

"""Data files (CSV, LIBSVM, compressed) and maxmargin model files."""

import bz2
import gzip
import io
import json
import lzma
import os
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

import maxmargin
from maxmargin.datasets import heart_scale_path, load_heart_scale
from maxmargin.io import (
    FORMAT_VERSION,
    DataFormatError,
    ModelFormatError,
    detect_format,
    load_data,
    load_model,
    read_data,
    read_model_metadata,
    save_libsvm_model,
    save_model,
)
from maxmargin.io import model as model_io

SEED_003 = "y,x1,x2\n1,1,5\n1,2,4\n-1,2,2\n-1,4,4\n"
HEART = os.fspath(heart_scale_path())


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


# --------------------------------------------------------------------------- CSV


def test_seed_003_csv_reads_as_is(tmp_path):
    ds = read_data(write(tmp_path, "seed.csv", SEED_003))
    assert ds.format == "csv"
    assert ds.feature_names == ["x1", "x2"]
    np.testing.assert_array_equal(ds.X, [[1, 5], [2, 4], [2, 2], [4, 4]])
    np.testing.assert_array_equal(ds.y, [1, 1, -1, -1])


@pytest.mark.parametrize(
    "text, kwargs",
    [
        ("1;1;5\n-1;2;2\n", {}),
        ("1\t1\t5\n-1\t2\t2\n", {}),
        ("1 1 5\n-1   2 2 \n", {}),
        ("# comment\n\n1,1,5\n\n-1,2,2\n", {}),
        ('"y","a","b"\n"1","1","5"\n"-1","2","2"\n', {}),
        ("1,5,1\n2,2,-1\n", {"label_column": -1}),
        ("1,5,1\n2,2,-1\n", {"label_column": "last"}),
        ("a,b,target\n1,5,1\n2,2,-1\n", {"label_column": "target"}),
        ("1|1|5\n-1|2|2\n", {"delimiter": "|"}),
    ],
)
def test_csv_variants(tmp_path, text, kwargs):
    X, y = load_data(write(tmp_path, "d.txt", text), **kwargs)
    np.testing.assert_array_equal(X, [[1, 5], [2, 2]])
    np.testing.assert_array_equal(y, [1, -1])


def test_csv_header_forced_and_labels_auto(tmp_path):
    p = write(tmp_path, "d.csv", "1,2,3\n1,1,5\n")
    X, y = load_data(p, header=True)
    assert X.shape == (1, 2)
    # without labels: as many columns as the model has features
    p2 = write(tmp_path, "nolab.csv", "1,5\n2,2\n")
    ds = read_data(p2, labels="auto", n_features=2)
    assert ds.y is None and ds.X.shape == (2, 2)
    ds = read_data(write(tmp_path, "lab.csv", "1,1,5\n"), labels="auto", n_features=2)
    assert ds.y.tolist() == [1.0]
    with pytest.raises(DataFormatError, match="expects 5 features"):
        read_data(p2, labels="auto", n_features=5)


@pytest.mark.parametrize(
    "text, line, pattern",
    [
        ("y,x1,x2\n1,1,5\n1,abc,4\n", 3, r"value in column 2 'abc' is not a number"),
        ("y,x1,x2\n1,1,5\n1,2\n", 3, r"expected 3 fields separated by ',', found 2"),
        ("y,x1,x2\n1,1,5\n1,2,4,7\n", 3, r"expected 3 fields separated by ',', found 4"),
        ("y,x1,x2\n1,1,5\ncat,2,4\n", 3, r"label 'cat' is not a number"),
        ("1,1,5\n1,,4\n", 2, r"empty value in column 2"),
        ("1,1,5\n1,nan,4\n", 2, r"values must be finite"),
    ],
)
def test_csv_errors_name_file_line_and_problem(tmp_path, text, line, pattern):
    p = write(tmp_path, "bad.csv", text)
    with pytest.raises(DataFormatError, match=pattern) as info:
        load_data(p)
    err = info.value
    assert err.line == line
    assert str(err).startswith(f"{p}, line {line}: ")
    assert isinstance(err, ValueError)


def test_empty_and_header_only_files(tmp_path):
    with pytest.raises(DataFormatError, match="the file is empty"):
        load_data(write(tmp_path, "empty.csv", ""))
    with pytest.raises(DataFormatError, match="only comments"):
        load_data(write(tmp_path, "c.csv", "# nothing\n\n"))
    with pytest.raises(DataFormatError, match="only a header"):
        load_data(write(tmp_path, "h.csv", "y,x1\n"))
    with pytest.raises(DataFormatError, match="no feature columns"):
        load_data(write(tmp_path, "one.csv", "1\n-1\n"), format="csv")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_data(tmp_path / "nope.csv")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        load_data(tmp_path)


def test_binary_and_non_utf8(tmp_path):
    with pytest.raises(DataFormatError, match="binary content"):
        load_data(write(tmp_path, "b.csv", b"1,2\x00\x01"))
    with pytest.raises(DataFormatError, match="not UTF-8") as info:
        load_data(write(tmp_path, "l.csv", b"1,2\n1,\xff\n"))
    assert info.value.line == 2


# --------------------------------------------------------------------------- LIBSVM


def test_heart_scale_matches_sklearn_reader():
    X, y = load_data(HEART)
    Xs, ys = load_svmlight_file(HEART)
    assert sp.issparse(X) and X.shape == (270, 13)
    assert X.indices.dtype == np.int32
    np.testing.assert_array_equal(X.toarray(), Xs.toarray())
    np.testing.assert_array_equal(y, ys)
    assert detect_format(open(HEART).read()) == "libsvm"


def test_load_heart_scale():
    X, y = load_heart_scale()
    assert isinstance(X, np.ndarray) and X.shape == (270, 13)
    assert (y == 1).sum() == 120 and (y == -1).sum() == 150
    Xs, _ = load_heart_scale(sparse=True)
    assert sp.issparse(Xs)


@pytest.mark.parametrize("codec", ["gzip", "bzip2", "xz"])
def test_compressed_files(tmp_path, codec):
    raw = open(HEART, "rb").read()
    comp = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[codec](raw)
    suffix = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz"}[codec]
    ds = read_data(write(tmp_path, "heart" + suffix, comp))
    assert ds.compression == codec and ds.format == "libsvm"
    np.testing.assert_array_equal(ds.X.toarray(), load_data(HEART)[0].toarray())
    # detected from content, not the name
    ds = read_data(write(tmp_path, "heart.data", comp))
    assert ds.compression == codec
    # CSV compressed as well
    X, y = load_data(
        write(
            tmp_path,
            "seed.csv" + suffix,
            {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[codec](SEED_003.encode()),
        )
    )
    np.testing.assert_array_equal(y, [1, 1, -1, -1])


def test_damaged_compressed_file(tmp_path):
    comp = gzip.compress(open(HEART, "rb").read())
    with pytest.raises(DataFormatError, match="damaged or truncated gzip"):
        load_data(write(tmp_path, "t.gz", comp[: len(comp) // 2]))
    with pytest.raises(DataFormatError, match="not gz-compressed"):
        load_data(write(tmp_path, "plain.gz", SEED_003))


@pytest.mark.parametrize(
    "text, line, pattern",
    [
        ("1 1:2 2:3\n-1 1:2 x:3\n", 2, r"feature index 'x' in 'x:3' is not an integer"),
        ("1 1:2\nabc 1:2\n", 2, r"label 'abc' is not a number"),
        ("1 1:2\n1 2:1 1:3\n", 2, r"indices must increase along a line: 1 comes after 2"),
        ("1 1:2\n1 1:2 3\n", 2, r"field 3 '3' is not of the form index:value"),
        ("1 1:2\n1 0:1 2:3\n", 2, r"feature index 0 is invalid \(LIBSVM indices start at 1\)"),
        ("1 1:2\n1 1:abc\n", 2, r"value 'abc' of feature 1 is not a number"),
        ("1 1:2\n1 1:nan\n", 2, r"not a finite number"),
        ("1 1:2\n1:3 2:4\n", 2, r"the label is missing"),
    ],
)
def test_libsvm_errors(tmp_path, text, line, pattern):
    p = write(tmp_path, "bad.svm", text)
    with pytest.raises(DataFormatError, match=pattern) as info:
        load_data(p, format="libsvm")
    assert info.value.line == line
    assert str(info.value).startswith(f"{p}, line {line}")


def test_libsvm_comments_qid_and_forced_formats(tmp_path):
    p = write(tmp_path, "q.svm", "# header comment\n1 qid:3 1:2 # tail\n-1 qid:3 3:4\n")
    X, y = load_data(p)
    np.testing.assert_array_equal(X.toarray(), [[2, 0, 0], [0, 0, 4]])
    # forcing CSV on a LIBSVM file gives a CSV error with a line number
    with pytest.raises(DataFormatError, match=r"line \d+: .*looks like LIBSVM format"):
        load_data(p, format="csv")
    with pytest.raises(ValueError, match="format must be one of"):
        load_data(p, format="arff")


def test_libsvm_n_features(tmp_path):
    p = write(tmp_path, "few.svm", "1 1:1\n-1 2:1\n")
    X, _ = load_data(p, n_features=5)
    assert X.shape == (2, 5) and X.indices.dtype == np.int32
    with pytest.raises(DataFormatError, match="feature index 2 is beyond the 1 features"):
        load_data(p, n_features=1)


def test_stdin(monkeypatch):
    class FakeStdin:
        buffer = io.BytesIO(SEED_003.encode())

    monkeypatch.setattr("sys.stdin", FakeStdin())
    ds = read_data("-")
    assert ds.path == "<stdin>" and ds.y.tolist() == [1, 1, -1, -1]


# --------------------------------------------------------------------------- model files


@pytest.fixture(scope="module")
def heart():
    return load_heart_scale()


def _same_predictions(a, b, X):
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"kernel": "linear", "C": 0.5},
        {"kernel": "poly", "degree": 2, "gamma": 0.3, "coef0": 1.0, "class_weight": {1: 2.0, -1: 1.0}},
        {"kernel": "rbf", "sigma": 2.0, "formulation": "l2"},
    ],
)
def test_model_round_trip(tmp_path, heart, params):
    X, y = heart
    clf = maxmargin.SVC(**params).fit(X, y)
    path = tmp_path / "m.mm"
    save_model(clf, path, info={"train_file": "heart_scale", "n": 270})
    loaded, meta = load_model(path, return_metadata=True)
    assert type(loaded) is maxmargin.SVC
    assert loaded.get_params() == clf.get_params()
    assert meta["format_version"] == FORMAT_VERSION and meta["estimator"]["class"] == "SVC"
    assert meta["info"] == {"train_file": "heart_scale", "n": 270}
    for name in maxmargin.SVC._state_attributes:
        a, b = getattr(clf, name), getattr(loaded, name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
        else:
            assert a == b or (a != a and b != b)
    _same_predictions(clf, loaded, X)
    if "class_weight" in params:  # int keys survive JSON
        assert loaded.class_weight == {1: 2.0, -1: 1.0}


def test_model_round_trip_sparse_multiclass(tmp_path):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    Xs = sp.csr_matrix(X)
    clf = maxmargin.SVC(C=3.0).fit(Xs, y + 10)
    save_model(clf, tmp_path / "iris.mm")
    loaded = load_model(tmp_path / "iris.mm")
    assert sp.issparse(loaded.support_vectors_)
    _same_predictions(clf, loaded, Xs)
    _same_predictions(clf, loaded, X)


def test_pipeline_with_scaler(tmp_path, heart):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = heart
    X = X * 10 + 3
    pipe = Pipeline([("scaler", StandardScaler()), ("svm", maxmargin.SVC())]).fit(X, y)
    save_model(pipe, tmp_path / "p.mm")
    loaded = load_model(tmp_path / "p.mm")
    assert isinstance(loaded, Pipeline) and [n for n, _ in loaded.steps] == ["scaler", "svm"]
    np.testing.assert_array_equal(loaded[0].mean_, pipe[0].mean_)
    _same_predictions(pipe, loaded, X)


def test_model_file_is_plain_npz_without_pickle(tmp_path, heart):
    clf = maxmargin.SVC().fit(*heart)
    path = tmp_path / "m.mm"
    save_model(clf, path)
    with np.load(path, allow_pickle=False) as npz:
        assert "__maxmargin__" in npz.files
        meta = json.loads(npz["__maxmargin__"].tobytes())
        for key in npz.files:
            assert npz[key].dtype != object
    assert meta["format"] == "maxmargin-model"
    assert meta["estimator"]["params"]["callback"] is None
    assert len(meta["sha256"]) == 64
    assert read_model_metadata(path)["sha256"] == meta["sha256"]


@pytest.fixture
def saved(tmp_path, heart):
    clf = maxmargin.SVC().fit(*heart)
    path = tmp_path / "m.mm"
    save_model(clf, path)
    return path


def test_flipped_byte_is_refused(saved):
    raw = bytearray(saved.read_bytes())
    failures = 0
    for pos in range(40, len(raw) - 30, max(1, len(raw) // 25)):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        saved.write_bytes(bytes(bad))
        try:
            load_model(saved)
        except ModelFormatError:
            failures += 1
    assert failures == len(range(40, len(raw) - 30, max(1, len(raw) // 25)))


def test_truncated_and_empty_files_are_refused(saved):
    raw = saved.read_bytes()
    for cut in (len(raw) // 3, len(raw) - 10, 10):
        saved.write_bytes(raw[:cut])
        with pytest.raises(ModelFormatError, match="damaged or truncated|not a maxmargin"):
            load_model(saved)
    saved.write_bytes(b"")
    with pytest.raises(ModelFormatError, match="empty"):
        load_model(saved)


def _rewrite(path, edit_meta, seal=True):
    """Rewrite the archive with edited contents: a valid zip with a valid file checksum
    (as someone who knows the format could), and the content checksum as ``edit_meta`` leaves it."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays["__maxmargin__"].tobytes())
    edit_meta(meta, arrays)
    arrays["__maxmargin__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path.write_bytes(model_io._seal(buf.getvalue()) if seal else buf.getvalue())


def test_rezipped_file_without_file_checksum_is_refused(saved):
    _rewrite(saved, lambda meta, arrays: None, seal=False)
    with pytest.raises(ModelFormatError, match="no file checksum"):
        load_model(saved)
    _rewrite(saved, lambda meta, arrays: None, seal=True)
    load_model(saved)


def test_tampered_file_is_refused(saved):
    def edit(meta, arrays):
        meta["estimator"]["params"]["C"] = 1000.0

    _rewrite(saved, edit)
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        load_model(saved)


def test_tampered_array_is_refused(saved):
    def edit(meta, arrays):
        arrays["estimator.dual_coef_"] = arrays["estimator.dual_coef_"] * 2

    _rewrite(saved, edit)
    with pytest.raises(ModelFormatError, match="checksum mismatch"):
        load_model(saved)


def test_newer_format_version_is_refused(saved):
    def edit(meta, arrays):
        meta["format_version"] = FORMAT_VERSION + 1
        meta["sha256"] = model_io._digest(meta, {k: v for k, v in arrays.items() if k != "__maxmargin__"})

    _rewrite(saved, edit)
    with pytest.raises(ModelFormatError, match=r"newer maxmargin \(format version 2.*upgrade"):
        load_model(saved)


def test_unknown_class_is_refused(saved):
    def edit(meta, arrays):
        meta["estimator"]["class"] = "os.system"
        meta["sha256"] = model_io._digest(meta, {k: v for k, v in arrays.items() if k != "__maxmargin__"})

    _rewrite(saved, edit)
    with pytest.raises(ModelFormatError, match="'os.system' is not available"):
        load_model(saved)


def test_not_a_model(tmp_path):
    with pytest.raises(ModelFormatError, match="not a maxmargin model"):
        load_model(write(tmp_path, "x.mm", "hello"))
    with pytest.raises(ModelFormatError, match="LIBSVM model file"):
        load_model(write(tmp_path, "x.model", "svm_type c_svc\n"))
    z = tmp_path / "z.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("a.txt", "hi")
    with pytest.raises(ModelFormatError):
        load_model(z)
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.mm")


def test_unsavable_models(tmp_path, heart):
    with pytest.raises(ValueError, match="not fitted"):
        save_model(maxmargin.SVC(), tmp_path / "u.mm")
    clf = maxmargin.SVC(kernel=lambda A, B: A @ B.T).fit(*heart)
    with pytest.raises(TypeError, match="callable kernel"):
        save_model(clf, tmp_path / "c.mm")
    from sklearn.svm import SVC as SkSVC

    with pytest.raises(TypeError, match="maxmargin estimators"):
        save_model(SkSVC().fit(*heart), tmp_path / "s.mm")
    assert not list(tmp_path.iterdir())


def test_atomic_write_keeps_old_file(tmp_path, heart, monkeypatch):
    clf = maxmargin.SVC().fit(*heart)
    path = tmp_path / "m.mm"
    save_model(clf, path)
    before = path.read_bytes()

    def boom(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(model_io.np, "savez_compressed", boom)
    with pytest.raises(KeyboardInterrupt):
        save_model(clf, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mm"]


def test_registry_serves_any_estimator_with_state_attributes(tmp_path, monkeypatch):
    """Classes added later (SVR, OneClassSVM, ...) work through ``_state_attributes``."""
    from sklearn.base import BaseEstimator

    class ToyModel(BaseEstimator):
        _state_attributes = ("w_", "b_", "label_", "_private", "nothing_")

        def __init__(self, alpha=1.0, mapping=None):
            self.alpha = alpha
            self.mapping = mapping

    monkeypatch.setattr(maxmargin, "ToyModel", ToyModel, raising=False)
    m = ToyModel(alpha=0.5, mapping={(1, 2): [1.5, float("inf")]})
    m.w_, m.b_, m.label_, m._private, m.nothing_ = np.arange(3.0), np.float32(2.5), "x", True, None
    save_model(m, tmp_path / "toy.mm")
    back = load_model(tmp_path / "toy.mm")
    assert isinstance(back, ToyModel) and back.alpha == 0.5
    assert back.mapping == {(1, 2): [1.5, float("inf")]}
    np.testing.assert_array_equal(back.w_, m.w_)
    assert back.b_ == 2.5 and back.label_ == "x" and back._private is True and back.nothing_ is None


def test_only_declared_attributes_are_set(saved):
    def edit(meta, arrays):
        meta["estimator"]["attributes"]["predict"] = 1
        meta["sha256"] = model_io._digest(meta, {k: v for k, v in arrays.items() if k != "__maxmargin__"})

    _rewrite(saved, edit)
    with pytest.raises(ModelFormatError, match="no stored attribute 'predict'"):
        load_model(saved)


# --------------------------------------------------------------------- issue 14
@pytest.mark.parametrize("scaled", [False, True])
def test_feature_names_survive_the_model_file(tmp_path, scaled):
    """Issue 14.2: after save/load, reordered DataFrame columns are refused, as before saving."""
    pd = pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(40, 3)), columns=["age", "chol", "bp"])
    y = np.where(X["age"] > 0, 1, -1)
    model = maxmargin.SVC(kernel="linear")
    if scaled:
        model = make_pipeline(StandardScaler(), model)
    model.fit(X, y)
    save_model(model, tmp_path / "m.mm")
    loaded = load_model(tmp_path / "m.mm")
    assert list(loaded.feature_names_in_) == ["age", "chol", "bp"]
    assert loaded.feature_names_in_.dtype == object
    assert loaded.n_features_in_ == 3
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(X[["bp", "chol", "age"]])


def test_libsvm_model_file_warns_that_names_are_lost(tmp_path):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame([[0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [-1.0, 0.0]], columns=["a", "b"])
    clf = maxmargin.SVC(kernel="linear").fit(X, [1, 1, -1, -1])
    with pytest.warns(UserWarning, match="feature names"):
        save_libsvm_model(clf, tmp_path / "m.model")


@pytest.mark.parametrize("index", [2_000_000_000, 3_000_000_000])
def test_huge_feature_index_is_refused_with_line_and_limit(tmp_path, index):
    """Issue 14.4: a stray feature index of 2e9 must not allocate gigabytes (nor overflow)."""
    from maxmargin.io.data import MAX_FEATURES

    p = tmp_path / "big.svm"
    p.write_text(f"1 1:0.5 2:1\n# a comment\n\n-1 1:-0.5 {index}:1\n1 2:0.3\n")
    with pytest.raises(
        DataFormatError, match=f"line 4: feature index {index:,} is beyond .* limit of {MAX_FEATURES:,} features"
    ):
        read_data(p)


def test_huge_feature_index_in_a_libsvm_model_or_matrix_is_refused(tmp_path):
    from maxmargin.io import load_libsvm_model

    p = tmp_path / "m.model"
    p.write_text(
        "svm_type c_svc\nkernel_type linear\nnr_class 2\ntotal_sv 2\nrho 0\nlabel 1 -1\nnr_sv 1 1\nSV\n"
        "1 1:1 2000000000:1\n-1 1:-1\n"
    )
    with pytest.raises(ModelFormatError, match="line 9: feature index 2,000,000,000 is beyond"):
        load_libsvm_model(p)
    X = sp.csr_matrix((np.ones(2), np.array([0, 2_000_000_000]), np.array([0, 1, 2])), shape=(2, 2_000_000_001))
    with pytest.raises(ValueError, match="number of features 2,000,000,001 is beyond"):
        maxmargin.SVC(kernel="linear").fit(X, [0, 1])

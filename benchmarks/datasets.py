"""Benchmark datasets from ../shared/data (never committed; see its README).

Set MAXMARGIN_DATA to the folder if it is elsewhere.  Each loader returns
(X_train, y_train, X_test, y_test, params) with the parameters the issues fix.
"""
from __future__ import annotations

import io
import lzma
import os
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("MAXMARGIN_DATA", HERE.parent.parent / "shared" / "data"))


def _xz(name):
    path = DATA / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: set MAXMARGIN_DATA to the shared data folder")
    with lzma.open(path) as f:
        return f.read()


def _svmlight(name, n_features=None):
    X, y = load_svmlight_file(io.BytesIO(_xz(name)), n_features=n_features)
    X = X.tocsr()
    X.indices = X.indices.astype(np.int32)  # LIBSVM (scikit-learn's SVC) takes 32-bit indices only
    X.indptr = X.indptr.astype(np.int32)
    return X, y


def a9a():
    Xtr, ytr = _svmlight("a9a.xz", 123)
    Xte, yte = _svmlight("a9a.t.xz", 123)
    return Xtr, ytr, Xte, yte, dict(C=1.0, gamma=0.05)


def ijcnn1():
    Xtr, ytr = _svmlight("ijcnn1.xz", 22)
    Xte, yte = _svmlight("ijcnn1.t.xz", 22)
    return Xtr.toarray(), ytr, Xte.toarray(), yte, dict(C=32.0, gamma=2.0)


def usps():
    def load(name):
        a = np.loadtxt(io.BytesIO(_xz(name)))
        return a[:, 1:], a[:, 0].astype(int)

    Xtr, ytr = load("usps-zip.train.xz")
    Xte, yte = load("usps-zip.test.xz")
    return Xtr, ytr, Xte, yte, dict(C=10.0, gamma="scale")


def _idx(name):
    raw = _xz(name)
    magic = int.from_bytes(raw[:4], "big")
    if magic == 2051:
        n, r, c = (int.from_bytes(raw[4 + 4 * k: 8 + 4 * k], "big") for k in range(3))
        return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, r * c)
    n = int.from_bytes(raw[4:8], "big")
    return np.frombuffer(raw, dtype=np.uint8, offset=8)[:n]


def mnist():
    Xtr = _idx("mnist-train-images-idx3-ubyte.xz") / 255.0
    ytr = _idx("mnist-train-labels-idx1-ubyte.xz").astype(int)
    Xte = _idx("mnist-t10k-images-idx3-ubyte.xz") / 255.0
    yte = _idx("mnist-t10k-labels-idx1-ubyte.xz").astype(int)
    return Xtr, ytr, Xte, yte, dict(C=10.0, gamma=0.02)


def skin(n_train=100_000, seed=0):
    a = np.loadtxt(io.BytesIO(_xz("Skin_NonSkin.txt.xz")))
    X, y = a[:, :3], a[:, 3].astype(int)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    tr, te = perm[:n_train], perm[n_train:]
    return X[tr], y[tr], X[te], y[te], dict(C=1.0, gamma="scale")


def dense100k(n=100_000, d=100, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(n + 20_000, d, n_informative=20, flip_y=0.05, random_state=seed)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


LOADERS = {"a9a": a9a, "ijcnn1": ijcnn1, "usps": usps, "mnist": mnist, "skin": skin, "dense100k": dense100k}

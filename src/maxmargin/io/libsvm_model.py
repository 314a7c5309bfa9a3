r"""LIBSVM's text model format, both ways.

A LIBSVM model file (what ``svm-train`` writes and ``svm-predict`` reads) is a
header of ``key value...`` lines, the line ``SV``, then one line per support
vector: its coefficients (``nr_class - 1`` of them) and its features as
``index:value``::

    svm_type c_svc
    kernel_type rbf
    gamma 0.076923076923076927
    nr_class 2
    total_sv 132
    rho 0.42446205176771573
    label 1 -1
    nr_sv 64 68
    SV
    1 1:0.166667 2:1 3:-0.333333 ...

LIBSVM keeps the labels in the order they first appear in the training data and
orients every one-vs-one decision value towards the first label of its pair;
maxmargin (like scikit-learn) lays out ``dual_coef_`` / ``intercept_`` by the
order of ``classes_``, and for two classes a positive decision value means
``classes_[1]``.  :func:`load_libsvm_model` converts the support vectors,
coefficients and offsets into maxmargin's layout, keeping LIBSVM's label order
in ``classes_`` by default so that the loaded estimator predicts exactly what
``svm-predict`` predicts, vote ties included (``label_order='sorted'`` sorts
the classes instead).  :func:`save_libsvm_model` writes the labels in the
order of ``classes_``, so ``svm-predict`` predicts exactly what the maxmargin
estimator predicts.

What LIBSVM's format does not hold is filled with "unknown" on load: the
training indices ``support_`` are ``0..total_sv-1``, and ``objective_``,
``margin_``, ``w_norm_``, ``loo_bound_``, ``duality_gap_``, ``train_error_`` and
``fit_time_`` are NaN.  ``n_features_in_`` is the largest feature index among
the support vectors (widen it with ``n_features=`` or :func:`widen_features`
for data with more features: LIBSVM's RBF kernel counts features that no
support vector has).  Platt-scaling parameters (``probA``/``probB``) are read
into ``probA_`` / ``probB_`` (and ``probability=True``), so ``predict_proba``
works as LIBSVM's ``-b 1``; ``prob_density_marks`` of one-class models are
ignored; precomputed-kernel models are refused.  Numbers are written in the shortest form that
reads back as the same double,
so a round trip is exact.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ._atomic import atomic_write
from .data import MAX_FEATURES, too_many_features_message
from .errors import ModelFormatError

__all__ = ["load_libsvm_model", "save_libsvm_model", "read_libsvm_model", "is_libsvm_model", "widen_features"]

#: LIBSVM svm_type -> maxmargin class name
SVM_TYPES = {
    "c_svc": "SVC",
    "nu_svc": "NuSVC",
    "one_class": "OneClassSVM",
    "epsilon_svr": "SVR",
    "nu_svr": "NuSVR",
}
_CLASS_TO_TYPE = {v: k for k, v in SVM_TYPES.items()}
#: LIBSVM kernel_type -> maxmargin kernel name
KERNEL_TYPES = {
    "linear": "linear",
    "polynomial": "poly",
    "rbf": "rbf",
    "sigmoid": "sigmoid",
    "precomputed": "precomputed",
}
_KERNEL_TO_TYPE = {v: k for k, v in KERNEL_TYPES.items()}
_CLASSIFIERS = ("c_svc", "nu_svc")
_HEADER_KEYS = (
    "svm_type",
    "kernel_type",
    "degree",
    "gamma",
    "coef0",
    "nr_class",
    "total_sv",
    "rho",
    "label",
    "probA",
    "probB",
    "prob_density_marks",
    "nr_sv",
)


def is_libsvm_model(path):
    """Whether ``path`` starts like a LIBSVM text model (``svm_type ...``)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.lstrip().startswith(b"svm_type ")


# --------------------------------------------------------------------------- reading


def read_libsvm_model(path):
    """Parse a LIBSVM model file into a dict of plain values (LIBSVM's own layout).

    Keys: ``svm_type``, ``kernel_type``, ``degree``, ``gamma``, ``coef0``,
    ``nr_class``, ``total_sv``, ``rho`` (array), ``label`` (array or None),
    ``probA``, ``probB``, ``nr_sv`` (arrays or None), ``sv_coef`` (array
    ``(nr_class-1, total_sv)``), ``SV`` (CSR matrix, 0-based columns).
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p}: is a directory, not a model file")
    with open(p, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ModelFormatError("not a LIBSVM model file (binary content)", p) from None
    lines = text.splitlines()
    head = {}
    sv_line = None
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if s == "SV":
            sv_line = no
            break
        key, *vals = s.split()
        if key not in _HEADER_KEYS:
            if no == 1:
                raise ModelFormatError("not a LIBSVM model file (it does not start with svm_type)", p)
            raise ModelFormatError(f"unknown entry {key!r} in the LIBSVM model header", p, no)
        if key in head:
            raise ModelFormatError(f"{key} given twice", p, no)
        head[key] = (vals, no)
    if "svm_type" not in head:
        raise ModelFormatError("not a LIBSVM model file (no svm_type line)", p)
    if sv_line is None:
        raise ModelFormatError("truncated LIBSVM model: no 'SV' line", p)

    def one(key, conv, default=None, required=False):
        if key not in head:
            if required:
                raise ModelFormatError(f"the header has no {key} line", p)
            return default
        vals, no = head[key]
        if len(vals) != 1:
            raise ModelFormatError(f"{key} needs one value, found {len(vals)}", p, no)
        try:
            return conv(vals[0])
        except ValueError:
            raise ModelFormatError(f"{key} value {vals[0]!r} is not valid", p, no) from None

    def many(key, conv, count, required=False):
        if key not in head:
            if required:
                raise ModelFormatError(f"the header has no {key} line", p)
            return None
        vals, no = head[key]
        if len(vals) != count:
            raise ModelFormatError(f"{key} needs {count} values, found {len(vals)}", p, no)
        try:
            return np.array([conv(v) for v in vals])
        except ValueError:
            raise ModelFormatError(f"{key} has a value that is not a number", p, no) from None

    m = {}
    m["svm_type"] = one("svm_type", str)
    if m["svm_type"] not in SVM_TYPES:
        raise ModelFormatError(
            f"unknown svm_type {m['svm_type']!r} (known: {', '.join(SVM_TYPES)})", p, head["svm_type"][1]
        )
    m["kernel_type"] = one("kernel_type", str, required=True)
    if m["kernel_type"] not in KERNEL_TYPES:
        raise ModelFormatError(f"unknown kernel_type {m['kernel_type']!r}", p, head["kernel_type"][1])
    if m["kernel_type"] == "precomputed":
        raise ModelFormatError("models with a precomputed kernel are not supported", p, head["kernel_type"][1])
    m["degree"] = one("degree", int, 3)
    m["gamma"] = one("gamma", float, 0.0)
    m["coef0"] = one("coef0", float, 0.0)
    k = m["nr_class"] = one("nr_class", int, required=True)
    total = m["total_sv"] = one("total_sv", int, required=True)
    if k < 1 or total < 0:
        raise ModelFormatError(f"invalid nr_class {k} / total_sv {total}", p)
    n_pairs = k * (k - 1) // 2
    m["rho"] = many("rho", float, n_pairs, required=True)
    classifier = m["svm_type"] in _CLASSIFIERS
    m["label"] = many("label", int, k, required=classifier)
    m["nr_sv"] = many("nr_sv", int, k, required=classifier)
    m["probA"] = many("probA", float, n_pairs if classifier else 1)
    m["probB"] = many("probB", float, n_pairs if classifier else 1)
    if m["nr_sv"] is not None and int(m["nr_sv"].sum()) != total:
        raise ModelFormatError(
            f"nr_sv adds up to {int(m['nr_sv'].sum())}, but total_sv is {total}", p, head["nr_sv"][1]
        )
    if classifier and m["label"] is not None and len(set(m["label"].tolist())) != k:
        raise ModelFormatError("label lists the same class twice", p, head["label"][1])

    n_coef = max(k - 1, 1)
    sv_lines = [(no, s) for no, s in ((i, lines[i - 1].strip()) for i in range(sv_line + 1, len(lines) + 1)) if s]
    if len(sv_lines) < total:
        raise ModelFormatError(
            f"truncated: total_sv is {total} but only {len(sv_lines)} support vector lines follow", p
        )
    if len(sv_lines) > total:
        raise ModelFormatError(
            f"{len(sv_lines) - total} line(s) after the {total} support vectors", p, sv_lines[total][0]
        )
    coef = np.empty((n_coef, total))
    data, indices, indptr = [], [], [0]
    for r, (no, s) in enumerate(sv_lines):
        tokens = s.split()
        if len(tokens) < n_coef:
            raise ModelFormatError(f"a support vector line needs {n_coef} coefficient(s)", p, no)
        try:
            coef[:, r] = [float(t) for t in tokens[:n_coef]]
        except ValueError:
            raise ModelFormatError(f"coefficient {tokens[:n_coef]} is not a number", p, no) from None
        last = 0
        for tok in tokens[n_coef:]:
            idx, sep, val = tok.partition(":")
            try:
                i = int(idx)
                v = float(val)
            except ValueError:
                raise ModelFormatError(f"feature {tok!r} is not of the form index:value", p, no) from None
            if not sep or i <= last:
                raise ModelFormatError(f"feature {tok!r}: indices must be positive and increasing", p, no)
            if i > MAX_FEATURES:
                raise ModelFormatError(too_many_features_message(i), p, no)
            last = i
            if v != 0.0:
                indices.append(i - 1)
                data.append(v)
        indptr.append(len(indices))
    n_features = (max(indices) + 1) if indices else 0
    m["sv_coef"] = coef
    m["SV"] = sp.csr_matrix(
        (np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int32), np.asarray(indptr, dtype=np.int32)),
        shape=(total, n_features),
    )
    if not (np.isfinite(coef).all() and np.isfinite(m["SV"].data).all() and np.isfinite(m["rho"]).all()):
        raise ModelFormatError("non-finite numbers in the model", p)
    return m


def _to_layout(m, sort_labels):
    """A LIBSVM classifier in maxmargin's (scikit-learn's) layout, with the classes in
    LIBSVM's order or sorted.

    Returns (classes, order of SV rows, dual_coef, intercept, n_support, probA, probB).
    """
    labels = m["label"]
    k = labels.shape[0]
    # new position a -> LIBSVM class perm[a]
    perm = np.argsort(labels, kind="stable") if sort_labels else np.arange(k)
    classes = labels[perm].astype(np.float64)
    nr_sv = m["nr_sv"]
    starts = np.concatenate([[0], np.cumsum(nr_sv)])
    # SV rows grouped by sorted class
    order = np.concatenate([np.arange(starts[perm[a]], starts[perm[a] + 1]) for a in range(k)]).astype(np.int64)
    n_support = nr_sv[perm].astype(np.int32)
    coef_old = m["sv_coef"]
    sv_class_old = np.repeat(np.arange(k), nr_sv)  # LIBSVM class index of each SV row

    def pair_index(i, j):  # i < j, LIBSVM's pair numbering
        return i * k - i * (i + 1) // 2 + (j - i - 1)

    n_pairs = k * (k - 1) // 2
    dual = np.zeros((max(k - 1, 1), coef_old.shape[1]))
    intercept = np.zeros(n_pairs)
    probA = None if m["probA"] is None else np.zeros(n_pairs)
    probB = None if m["probB"] is None else np.zeros(n_pairs)
    sv_class_new = np.empty(k, dtype=np.int64)
    sv_class_new[perm] = np.arange(k)  # LIBSVM class -> sorted index
    new_class_of_row = sv_class_new[sv_class_old]
    q = 0
    for a in range(k):
        for b in range(a + 1, k):
            i, j = perm[a], perm[b]
            sign = 1.0
            if i > j:
                i, j, sign = j, i, -1.0
            pi = pair_index(i, j)
            # LIBSVM: SVs of class i carry the pair's coefficient in row j-1, SVs of class j in row i
            rows_i = sv_class_old == i
            rows_j = sv_class_old == j
            coef_pair = np.zeros(coef_old.shape[1])
            coef_pair[rows_i] = coef_old[j - 1, rows_i]
            coef_pair[rows_j] = coef_old[i, rows_j]
            coef_pair *= sign
            rho = sign * m["rho"][pi]
            # maxmargin: SVs of class a in row b-1, SVs of class b in row a
            ra = new_class_of_row == a
            rb = new_class_of_row == b
            dual[b - 1, ra] = coef_pair[ra]
            dual[a, rb] = coef_pair[rb]
            intercept[q] = -rho
            if probA is not None:
                probA[q] = m["probA"][pi]
            if probB is not None:
                probB[q] = sign * m["probB"][pi]
            q += 1
    dual = dual[:, order]
    if k == 2:  # scikit-learn: positive decision values mean classes_[1]
        dual = -dual
        intercept = -intercept
    return classes, order, dual, intercept, n_support, probA, probB


def widen_features(estimator, n_features):
    """Give a loaded LIBSVM model ``n_features`` input features (zero columns added)."""
    sv = estimator.support_vectors_
    have = sv.shape[1]
    if n_features < have:
        raise ValueError(f"the model's support vectors use {have} features; cannot narrow to {n_features}")
    if n_features > have:
        if sp.issparse(sv):
            sv = sp.csr_matrix((sv.data, sv.indices, sv.indptr), shape=(sv.shape[0], n_features))
        else:
            sv = np.hstack([sv, np.zeros((sv.shape[0], n_features - have))])
        estimator.support_vectors_ = sv
    estimator.n_features_in_ = int(n_features)
    if hasattr(estimator, "shape_fit_"):
        estimator.shape_fit_ = (estimator.shape_fit_[0], int(n_features))
    return estimator


def load_libsvm_model(path, *, n_features=None, label_order="libsvm"):
    """Read a LIBSVM model file into the matching maxmargin estimator.

    ``c_svc`` gives :class:`maxmargin.SVC`; ``nu_svc``, ``epsilon_svr``,
    ``nu_svr`` and ``one_class`` give ``NuSVC``, ``SVR``, ``NuSVR`` and
    ``OneClassSVM`` where this maxmargin has them.  The estimator predicts what
    LIBSVM's ``svm-predict`` predicts.  ``n_features`` widens the model to
    that many input features (see :func:`widen_features`).

    ``label_order='libsvm'`` (the default) keeps the classes in the order of the
    file's ``label`` line (LIBSVM's order of first appearance in the training
    data), so that even one-vs-one vote ties go to the class ``svm-predict``
    picks; ``'sorted'`` sorts ``classes_`` as scikit-learn does (identical
    predictions except, rarely, on exact vote ties).
    """
    if label_order not in ("libsvm", "sorted"):
        raise ValueError(f"label_order must be 'libsvm' or 'sorted', got {label_order!r}")
    import maxmargin

    p = os.fspath(path)
    m = read_libsvm_model(p)
    cls_name = SVM_TYPES[m["svm_type"]]
    cls = getattr(maxmargin, cls_name, None)
    if cls is None:
        raise ModelFormatError(f"svm_type {m['svm_type']} needs maxmargin.{cls_name}, which this version lacks", p)
    kernel = KERNEL_TYPES[m["kernel_type"]]
    params = {"kernel": kernel}
    valid = cls().get_params()
    for name, val in (("gamma", m["gamma"]), ("degree", m["degree"]), ("coef0", m["coef0"])):
        if name in valid:
            params[name] = val
    if kernel == "linear" and "gamma" in valid:
        params["gamma"] = "scale"
    classifier = m["svm_type"] in _CLASSIFIERS
    if classifier and m["probA"] is not None and "probability" in valid:
        params["probability"] = True
    est = cls(**params)
    total = m["total_sv"]
    SV = m["SV"]
    state = {}
    if classifier:
        classes, order, dual, intercept, n_support, probA, probB = _to_layout(m, label_order == "sorted")
        SV = SV[order]
        n_pairs = intercept.shape[0]
        state.update(
            classes_=classes,
            probA_=probA if probA is not None else np.empty(0),
            probB_=probB if probB is not None else np.empty(0),
        )
        unknown = np.full(n_pairs, np.nan)
        state.update(
            n_iter_=np.zeros(n_pairs, dtype=np.int32),
            objective_=unknown,
            margin_=unknown.copy(),
            w_norm_=unknown.copy(),
            duality_gap_=unknown.copy(),
            loo_bound_=np.nan,
            train_error_=np.nan,
            _linear_w=None,
        )
    else:
        dual = m["sv_coef"][:1].copy()
        intercept = -m["rho"][:1].copy()
        n_support = np.array([total], dtype=np.int32)
        state.update(n_iter_=0, objective_=np.nan, epsilon_=np.nan, offset_=float(m["rho"][0]))
    nf = SV.shape[1]
    dense = SV.shape[0] * max(nf, 1) <= 4_000_000 or SV.nnz > 0.25 * SV.shape[0] * max(nf, 1)
    state.update(
        support_vectors_=SV.toarray() if dense else SV,
        _sparse=not dense,
        support_=np.arange(total, dtype=np.int32),
        dual_coef_=dual,
        intercept_=intercept,
        n_support_=n_support,
        n_features_in_=nf,
        shape_fit_=(total, nf),
        _gamma=float(m["gamma"]) if kernel in ("poly", "rbf", "sigmoid") else 0.0,
        fit_status_=0,
        fit_time_=np.nan,
    )
    wanted = set(getattr(cls, "_state_attributes", ())) | {"n_features_in_", "classes_"}
    for name in wanted:
        if name == "classes_" and not classifier:
            continue
        setattr(est, name, state.get(name))
    if n_features is not None:
        widen_features(est, n_features)
    return est


# --------------------------------------------------------------------------- writing


def _g(x):
    """Shortest text that reads back as the same double (LIBSVM reads with strtod)."""
    r = repr(float(x))
    return r[:-2] if r.endswith(".0") else r


def _label_text(c):
    try:
        f = float(c)
    except (TypeError, ValueError):
        raise ValueError(f"LIBSVM model files need integer class labels, not {c!r}") from None
    if not f.is_integer() or abs(f) >= 2**31:
        raise ValueError(f"LIBSVM model files need integer class labels, not {c!r}")
    return str(int(f))


def save_libsvm_model(estimator, path):
    """Write a fitted maxmargin estimator (or any scikit-learn-style SVM) as a LIBSVM model file.

    The write is atomic.  Classifiers need integer labels (LIBSVM's format
    stores labels as integers).  Kernels: linear, poly, rbf, sigmoid.
    """
    cls_name = type(estimator).__name__
    svm_type = _CLASS_TO_TYPE.get(cls_name)
    if svm_type is None:
        raise ValueError(f"{cls_name} has no LIBSVM model type (known: {', '.join(_CLASS_TO_TYPE)})")
    kernel = estimator.kernel
    if not isinstance(kernel, str) or kernel not in _KERNEL_TO_TYPE or kernel == "precomputed":
        raise ValueError(
            f"kernel {kernel!r} cannot be written to a LIBSVM model file (linear, poly, rbf and sigmoid can)"
        )
    if getattr(estimator, "_linear_w", None) is not None and estimator.support_.shape[0] == 0:
        raise ValueError(
            "this model has no support vectors (fitted by a primal solver); "
            "LIBSVM model files describe a model by its support vectors"
        )
    if getattr(estimator, "_early_rho", None) is not None:
        raise ValueError(
            "this model is the routed level-k model of solver='divide' with early_stop (one binary model "
            "per part): a LIBSVM model file holds one model; use maxmargin.io.save_model"
        )
    if getattr(estimator, "feature_names_in_", None) is not None:
        import warnings

        warnings.warn(
            "a LIBSVM model file cannot store the feature names the model was fitted with: the "
            "loaded model will not check the columns of a DataFrame (save_model keeps them)",
            UserWarning,
            stacklevel=2,
        )
    SV = estimator.support_vectors_
    SV = sp.csr_matrix(SV) if not sp.issparse(SV) else SV.tocsr()
    SV.sort_indices()
    dual = np.asarray(estimator.dual_coef_, dtype=np.float64)
    intercept = np.asarray(estimator.intercept_, dtype=np.float64).ravel()
    gamma = getattr(estimator, "_gamma", None)
    if gamma is None:
        gamma = estimator.gamma
    out = [f"svm_type {svm_type}", f"kernel_type {_KERNEL_TO_TYPE[kernel]}"]
    if kernel == "poly":
        out.append(f"degree {int(estimator.degree)}")
    if kernel in ("poly", "rbf", "sigmoid"):
        out.append(f"gamma {_g(gamma)}")
    if kernel in ("poly", "sigmoid"):
        out.append(f"coef0 {_g(estimator.coef0)}")
    if svm_type in _CLASSIFIERS:
        classes = estimator.classes_
        k = len(classes)
        labels = [_label_text(c) for c in classes]
        if k == 2:
            sv_coef, rho = -dual, intercept.copy()
        else:
            sv_coef, rho = dual, -intercept
        out.append(f"nr_class {k}")
        out.append(f"total_sv {SV.shape[0]}")
        out.append("rho " + " ".join(_g(r) for r in rho))
        out.append("label " + " ".join(labels))
        pa, pb = getattr(estimator, "probA_", None), getattr(estimator, "probB_", None)
        if pa is not None and pb is not None and np.size(pa) == rho.shape[0] and np.size(pb) == rho.shape[0]:
            # maxmargin keeps Platt's (A, B) per pair oriented as LIBSVM does (towards the pair's first class)
            out.append("probA " + " ".join(_g(v) for v in np.ravel(pa)))
            out.append("probB " + " ".join(_g(v) for v in np.ravel(pb)))
        out.append("nr_sv " + " ".join(str(int(v)) for v in estimator.n_support_))
    else:
        sv_coef, rho = dual[:1], -intercept[:1]
        out.append("nr_class 2")
        out.append(f"total_sv {SV.shape[0]}")
        out.append("rho " + _g(rho[0]))
    out.append("SV")
    lines = []
    for r in range(SV.shape[0]):
        s, e = SV.indptr[r], SV.indptr[r + 1]
        coefs = " ".join(_g(c) for c in sv_coef[:, r])
        feats = " ".join(f"{int(i) + 1}:{_g(v)}" for i, v in zip(SV.indices[s:e], SV.data[s:e]) if v != 0)
        lines.append(f"{coefs} {feats}".rstrip() + " ")
    text = "\n".join(out + lines) + "\n"

    def write(fh):
        fh.write(text)

    atomic_write(path, write, mode="w")

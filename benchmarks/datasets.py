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
        n, r, c = (int.from_bytes(raw[4 + 4 * k : 8 + 4 * k], "big") for k in range(3))
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


# ---------------------------------------------------------------------------
# Generated shapes (fixed seeds): the data nobody tuned on (issue 11).
# ---------------------------------------------------------------------------


def pendigits():
    Xtr, ytr = _svmlight("pendigits.xz", 16)
    Xte, yte = _svmlight("pendigits.t.xz", 16)
    return Xtr.toarray(), ytr, Xte.toarray(), yte, dict(C=10.0, gamma="scale")


def letter26(n=15_000, n_test=5_000, seed=11):
    """Dense, 16 features, 26 classes (the shape of UCI letter): two Gaussian
    clusters per class in 16-D, integer-valued features in 0..15 as in letter."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n + n_test,
        16,
        n_informative=14,
        n_redundant=2,
        n_classes=26,
        n_clusters_per_class=2,
        class_sep=2.5,
        flip_y=0.01,
        random_state=seed,
    )
    X = np.clip(np.round((X - X.min(0)) / (X.max(0) - X.min(0)) * 15), 0, 15)
    return X[:n], y[:n], X[n:], y[n:], dict(C=10.0, gamma="scale")


def _zipf_docs(rng, n, vocab, topics, lengths, topic_share):
    """CSR word counts: each word from the global Zipf law over ``vocab`` words, or
    (with probability ``topic_share``) from the document's topic vocabulary."""
    import scipy.sparse as sp

    rank_p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    rank_p /= rank_p.sum()
    rows, cols = [], []
    for i in range(n):
        L = lengths[i]
        k = rng.binomial(L, topic_share)
        words = rng.choice(vocab, size=L - k, p=rank_p)
        t = topics[i]
        if k:
            words = np.concatenate([words, t[np.minimum(rng.zipf(1.3, size=k) - 1, t.size - 1)]])
        rows.append(np.full(words.size, i))
        cols.append(words)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, vocab))
    X.sum_duplicates()
    return X


def _tfidf(X, idf=None):
    """Sublinear term frequency (1 + log count) times idf (from the training
    documents), rows scaled to unit length."""
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    if idf is None:
        df = np.bincount(X.indices, minlength=X.shape[1])
        idf = np.log((1 + X.shape[0]) / (1 + df)) + 1
    X = sp.csr_matrix(X, copy=True)
    X.data = 1 + np.log(X.data)
    return normalize(sp.csr_matrix(X.multiply(idf[None, :]))), idf


def text100(n=6_400, n_test=2_000, vocab=50_000, n_classes=100, seed=12):
    """Sparse text: 100 classes, ~6k documents x 50k words, Zipf word counts
    (about 60 distinct words a document), TF-IDF rows of unit length."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    y = rng.integers(0, n_classes, size=m)
    topic_words = [rng.choice(vocab // 2, size=300, replace=False) for _ in range(n_classes)]
    lengths = rng.poisson(90, size=m) + 5
    X = _zipf_docs(rng, m, vocab, [topic_words[c] for c in y], lengths, 0.05)
    Xtr, idf = _tfidf(X[:n])
    Xte, _ = _tfidf(X[n:], idf)
    return _int32(Xtr), y[:n], _int32(Xte), y[n:], dict(C=10.0, gamma=1.0)


def sparse40k(n=40_000, n_test=10_000, fields=12, levels=25, seed=13):
    """Very sparse binary: 40k x 300, 12 nonzeros a row: 12 categorical fields of 25
    levels each, one-hot (as a9a's 14 of 123), level popularity Zipf-like; labels
    from level weights plus one interaction of two fields (30% positive), 2% flipped."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + n_test
    d = fields * levels
    p = 1.0 / np.arange(1, levels + 1) ** 1.2
    p /= p.sum()
    lev = np.stack([rng.choice(levels, size=m, p=p) for _ in range(fields)], axis=1)
    cols = lev + levels * np.arange(fields)[None, :]
    X = sp.csr_matrix((np.ones(m * fields), cols.ravel(), np.arange(0, m * fields + 1, fields)), shape=(m, d))
    w = rng.normal(size=d)
    inter = rng.normal(size=(levels, levels))
    s = X @ w + 1.5 * inter[lev[:, 0], lev[:, 1]]
    y = np.where(s > np.quantile(s, 0.7), 1, -1)
    flip = rng.random(m) < 0.02
    y[flip] = -y[flip]
    return _int32(X[:n]), y[:n], _int32(X[n:]), y[n:], dict(C=1.0, gamma="scale")


def _int32(X):
    X = X.tocsr()
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def zipf50(n=20_000, n_test=5_000, d=30, k=50, seed=21):
    """Imbalanced many classes: 50 Gaussian classes in 30-D with Zipf sizes (the largest
    22% of the rows, the smallest 0.4%), centres N(0, 1.5^2), unit noise.  One large class
    whose block does not fit in cache_size beside the others, and easy pairs (few SVs)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, k + 1)
    y = rng.choice(k, size=n + n_test, p=p / p.sum())
    X = 1.5 * rng.normal(size=(k, d))[y] + rng.normal(size=(n + n_test, d))
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def easy20k(n=20_000, n_test=5_000, d=10, seed=22):
    """Large but easy binary: two Gaussian clouds 3 apart in each of 10 dimensions, about 50
    support vectors in 20k rows (the batched solver's q = 1024 rows of the first round were
    most of its fit)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=n + n_test)
    X = rng.normal(size=(n + n_test, d)) + 3.0 * y[:, None]
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def classes300(per_class=20, n_test_per_class=5, d=20, k=300, seed=23):
    """Very many small classes: 300 Gaussian classes of 20 rows in 20-D (44,850 one-vs-one
    pairs of 40 rows each), where the per-pair work outside the solver decides."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), per_class + n_test_per_class)
    X = 2.0 * rng.normal(size=(k, d))[y] + rng.normal(size=(y.size, d))
    test = np.tile(np.arange(per_class + n_test_per_class) >= per_class, k)
    return X[~test], y[~test], X[test], y[test], dict(C=1.0, gamma="scale")


def hashed300k(n=300_000, n_test=50_000, d=1 << 20, k=4, seed=32):
    """Very sparse rows over a huge feature space (hashed categorical features, as click logs): 4 of 2**20
    columns a row, values 1 (2 where two hashes collide), labels from planted weights plus logistic noise.  The
    weight vector (8 MB) outgrows the per-core cache: every weight read is a miss of its own."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + n_test
    cols = np.sort(rng.integers(0, d, size=(m, k)), axis=1)
    X = sp.csr_matrix((np.ones(m * k), cols.ravel(), np.arange(0, m * k + 1, k)), shape=(m, d))
    X.sum_duplicates()
    s = X @ rng.normal(size=d) + rng.logistic(size=m)
    y = np.where(s > 0, 1, -1)
    return _int32(X[:n]), y[:n], _int32(X[n:]), y[n:], dict(C=1.0, gamma="scale")


def tall200k(n=200_000, n_test=50_000, d=20, seed=31):
    """Tall and thin dense: 200k x 20 Gaussian rows, labels from a planted direction plus noise (overlapping
    classes, ~45% of the rows support vectors).  32 MB of rows: the dual solvers' random visiting order misses the
    cache on every row."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    y = np.where(X @ rng.normal(size=d) + 1.5 * rng.normal(size=n + n_test) > 0, 1, -1)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def text2(n=6_000, n_test=2_000, vocab=30_000, seed=42):
    """Wide sparse text, two classes: ~6k documents x 30k words, Zipf word counts with 4% of the words from
    the class's own 400 (about 60 distinct words a document), TF-IDF rows of unit length.  Binary, so the
    batched solver (not the one-vs-one class blocks) computes its kernel rows (added in session 13: its
    rows went through a single-threaded sparse-times-dense product, 3.9 s of a 4.2 s fit)."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    y = rng.integers(0, 2, size=m)
    topic_words = [rng.choice(vocab // 2, size=400, replace=False) for _ in range(2)]
    X = _zipf_docs(rng, m, vocab, [topic_words[c] for c in y], rng.poisson(80, size=m) + 5, 0.04)
    Xtr, idf = _tfidf(X[:n])
    Xte, _ = _tfidf(X[n:], idf)
    return _int32(Xtr), y[:n], _int32(Xte), y[n:], dict(C=10.0, gamma=1.0)


def dense2k(n=5_000, n_test=2_000, d=2_000, seed=1):
    """Dense and wide, two classes: 5k x 2,000 features (50 informative, the rest noise; as gene expression or
    image descriptors), about 3,400 support vectors.  Each kernel row is a 2,000-long product per column (added
    in session 13: its rows' column chunks, 2048 + 2048 + 904, left one of two threads idle)."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n + n_test, d, n_informative=50, random_state=seed)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def wide400(n=320, n_test=80, d=20_000, seed=51):
    """Far fewer rows than features, dense (as microarrays): 320 x 20,000 Gaussian rows, labels from planted
    weights plus noise.  The rows (51 MB) pass the cache once an epoch; the dual has 320 variables (session 28)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    s = X @ rng.normal(size=d)
    y = np.where(s + 0.5 * s.std() * rng.normal(size=n + n_test) > 0, 1, -1)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def imbal100k(n=80_000, n_test=20_000, d=50, rare=0.01, seed=52):
    """Rare positives: 100k x 50 dense Gaussian rows, the top 1% of a noisy planted score positive (fraud,
    faults).  The hinge loss's dual takes ~800 epochs here, the last of them cycles of unshrinking (session 28)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    s = X @ rng.normal(size=d) + rng.normal(size=n + n_test)
    y = np.where(s > np.quantile(s, 1 - rare), 1, -1)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def mid64(n=60_000, n_test=15_000, d=64, k=10, seed=55):
    """Dense rows of middling width, many of them: 75k x 64 Gaussian features (30 MB of training rows), 10 classes
    (the argmax of planted linear scores plus unit noise) -- sensor or embedding features.  The shape where the
    coordinate-descent loops keep the dense layout (session 35)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    y = (X @ rng.normal(size=(d, k)) + rng.normal(size=(n + n_test, k))).argmax(1)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def emb128(n=8_000, n_test=2_000, d=128, k=10, seed=57):
    """Few rows of embedding width: 10k x 128 dense (8 MB of training rows, below the size rules of session 35),
    unit-length rows around 10 overlapping class centres -- sentence or image embeddings of one labelled task
    (one-vs-rest test accuracy ~78%).  The shape where the dense layout pays whatever the size
    (session 36)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 0.02
    y = rng.integers(0, k, size=n + n_test)
    X = centres[y] + rng.normal(size=(n + n_test, d)) / np.sqrt(d)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    if k == 2:
        y = np.where(y == 1, 1, -1)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def emb100c(n=20_000, n_test=5_000, d=256, k=100, seed=58):
    """Fine-grained classes over embeddings: 25k x 256 dense unit rows around 100 overlapping class centres (image
    features of a 100-class task; one-vs-rest test accuracy ~60%).  Many one-vs-rest problems on dense rows, and a
    Crammer-Singer problem of 100 classes on dense rows (session 37)."""
    return emb128(n=n, n_test=n_test, d=d, k=k, seed=seed)


def clicks(n=400_000, n_test=100_000, fields=20, seed=59):
    """Click logs one-hot encoded: 500k rows, one level of each of 20 categorical fields a row (levels per field
    from 10 to 30,000, each field's levels Zipf-distributed; 87k columns in all), values 1, ~8% positives from
    planted weights plus logistic noise.  Many rows of unit values over a mid-sized feature space: 8M stored values
    out of cache, the weights (0.7 MB) in the per-core cache (session 37)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + n_test
    levels = np.geomspace(10, 30_000, fields).astype(np.int64)
    offsets = np.r_[0, np.cumsum(levels)]
    cols = np.empty((m, fields), dtype=np.int64)
    for f in range(fields):
        cols[:, f] = offsets[f] + (rng.zipf(1.3, m) - 1) % levels[f]
    X = sp.csr_matrix(
        (np.ones(m * fields), cols.ravel(), np.arange(0, m * fields + 1, fields)), shape=(m, int(offsets[-1]))
    )
    w = rng.normal(size=X.shape[1]) * 0.7
    s = X @ w
    s = s - np.quantile(s, 0.93)
    y = np.where(rng.random(m) < 1.0 / (1.0 + np.exp(-2.0 * s)), 1, -1)
    return _int32(X[:n]), y[:n], _int32(X[n:]), y[n:], dict(C=1.0, gamma="scale")


def short_text(n=160_000, n_test=40_000, vocab=100_000, seed=53):
    """Short documents (as tweets or titles): 200k rows of 3-13 distinct words from a Zipf law over 100k words,
    values uniform in [0.1, 1.1), rows scaled to unit length; labels from planted weights plus noise."""
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    rng = np.random.default_rng(seed)
    m = n + n_test
    ptr = np.r_[0, np.cumsum(rng.integers(3, 14, m))]
    cols = (rng.zipf(1.2, ptr[-1]) - 1) % vocab
    X = sp.csr_matrix((rng.random(ptr[-1]) + 0.1, cols, ptr), shape=(m, vocab))
    X.sum_duplicates()
    X = normalize(X)
    s = np.asarray(X @ rng.normal(size=vocab))
    y = np.where(s + 0.5 * s.std() * rng.normal(size=m) > np.median(s), 1, -1)
    return _int32(X[:n]), y[:n], _int32(X[n:]), y[n:], dict(C=1.0, gamma="scale")


def classes200(n=16_000, n_test=4_000, d=5_000, k=200, seed=54):
    """Many classes on sparse rows: 20k x 5,000 at 1% non-zeros, 200 classes (the argmax of planted scores plus
    noise; ~80 rows a class)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + n_test
    X = sp.random(m, d, density=0.01, format="csr", random_state=seed, dtype=np.float64)
    s = np.asarray(X @ rng.normal(size=(d, k)))
    y = (s + 0.3 * s.std() * rng.normal(size=s.shape)).argmax(axis=1)
    return _int32(X[:n]), y[:n], _int32(X[n:]), y[n:], dict(C=1.0, gamma="scale")


# --------------------------------------------------------------------------- wide text (session 33's shapes)
#
# Binary and 20-class TF-IDF text in the shapes of the usual LIBLINEAR benchmarks (news20, rcv1, real-sim, long
# documents, tweets), generated with fixed seeds; the share of class words is set so that LIBLINEAR's test accuracy
# is that of the real sets (news20b 97.0%, rcv1b 96.8%, realsim 97.5%, longdocs 97.5%, tweets 93.7%, news20m 87.8%;
# session 33's scratch versions were separable, 99.6-100%).  Session 33 built them in scratch code; since
# session 34 they live here.  The words are drawn in one vectorised pass (:func:`_zipf_words`): ``_zipf_docs``
# draws row by row, which costs O(vocab) a row and takes minutes at 10^5 rows over 10^6 words.


def _zipf_words(rng, lengths, vocab, topics, topic_share, exponent=1.1):
    """CSR word counts, as :func:`_zipf_docs` but vectorised: row ``i`` has ``lengths[i]`` words, each from the
    global Zipf law (``exponent``) over ``vocab`` words or, with probability ``topic_share``, from the row's
    topic vocabulary ``topics[i]`` (an array of word ids; rank r drawn with probability ~ r**-1.3)."""
    import scipy.sparse as sp

    m = lengths.shape[0]
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1) ** exponent)
    cdf /= cdf[-1]
    total = int(lengths.sum())
    rows = np.repeat(np.arange(m), lengths)
    cols = np.minimum(np.searchsorted(cdf, rng.random(total)), vocab - 1)
    own = np.flatnonzero(rng.random(total) < topic_share)
    if own.size:
        # topic words: rank from a Zipf law over the topic's own words
        sizes = np.array([len(topics[i]) for i in range(m)])
        rank = np.minimum(rng.zipf(1.3, size=own.size) - 1, sizes[rows[own]] - 1)
        flat = np.concatenate([np.asarray(t) for t in topics])
        start = np.r_[0, np.cumsum(sizes)[:-1]]
        cols[own] = flat[start[rows[own]] + rank]
    X = sp.csr_matrix((np.ones(total), (rows, cols)), shape=(m, vocab))
    X.sum_duplicates()
    return X


def _wide_text(n, n_test, vocab, mean_words, topic_size, topic_share, seed, n_classes=2):
    """Labels and TF-IDF rows (unit length) from :func:`_zipf_words`: each class has ``topic_size`` words of its
    own among the first half of the vocabulary; document lengths Poisson(``mean_words``) + 3."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    y = rng.integers(0, n_classes, size=m)
    topic_words = [rng.choice(vocab // 2, size=topic_size, replace=False) for _ in range(n_classes)]
    lengths = rng.poisson(mean_words, size=m) + 3
    X = _zipf_words(rng, lengths, vocab, [topic_words[c] for c in y], topic_share)
    Xtr, idf = _tfidf(X[:n])
    Xte, _ = _tfidf(X[n:], idf)
    if n_classes == 2:
        y = np.where(y == 1, 1, -1)
    return _int32(Xtr), y[:n], _int32(Xte), y[n:], dict(C=1.0, gamma=1.0)


def news20b(n=12_000, n_test=4_000, seed=61):
    """news20.binary's shape: 12k documents over 1,000,000 words, ~240 distinct words a document (long tail:
    most words occur once in the corpus)."""
    return _wide_text(n, n_test, 1_000_000, 400, 600, 0.009, seed)


def rcv1b(n=20_000, n_test=5_000, seed=62):
    """rcv1.binary's shape: 20k documents over 47,000 words, ~75 distinct words a document."""
    return _wide_text(n, n_test, 47_000, 108, 500, 0.03, seed)


def realsim(n=60_000, n_test=12_000, seed=63):
    """real-sim's shape: 60k documents over 20,000 words, ~50 distinct words a document."""
    return _wide_text(n, n_test, 20_000, 69, 400, 0.05, seed)


def longdocs(n=3_000, n_test=1_000, seed=64):
    """Few long documents: 3k rows over 100,000 words, ~1,000 distinct words a row (a pass over the rows is
    larger than the L3 cache: memory-bound)."""
    return _wide_text(n, n_test, 100_000, 2_600, 800, 0.003, seed)


def tweets(n=100_000, n_test=20_000, seed=65):
    """Many very short documents: 100k rows over 200,000 words, ~13 distinct words a row."""
    return _wide_text(n, n_test, 200_000, 11, 300, 0.15, seed)


def abstracts(n=4_000, n_test=1_000, seed=67):
    """Few mid-length documents over a small vocabulary: 4k rows over 5,000 words, ~150 distinct words a row
    (7 MB of training rows: rows and weights stay in cache).  The shape where the split dual epochs lost 1.5-1.7x
    to one thread (session 36)."""
    return _wide_text(n, n_test, 5_000, 300, 60, 0.02, seed)


def news20m(n=11_000, n_test=4_000, seed=66):
    """news20's multi-class shape: 20 classes, 11k documents over 130,000 words, ~130 distinct words a row."""
    return _wide_text(n, n_test, 130_000, 195, 500, 0.015, seed, n_classes=20)


# --------------------------------------------------------------------------- session 38: small, unscaled, mixed


def _split_at(X, y, n):
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0, gamma="scale")


def tiny(seed=0):
    """200 + 100 rows x 20 dense features (make_classification, 8 informative): fits of a millisecond."""
    from sklearn.datasets import make_classification

    X, y = make_classification(300, 20, n_informative=8, random_state=seed)
    return _split_at(X, y, 200)


def cancer(seed=0):
    """scikit-learn's breast cancer set, unscaled (columns from ~0.001 to ~4,000), 450 + 119 rows."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    p = np.random.default_rng(seed).permutation(len(y))
    return _split_at(X[p], y[p], 450)


def digits(seed=0):
    """scikit-learn's digits, 1,400 + 397 rows x 64 pixels of 0..16 (unscaled), 10 classes."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    p = np.random.default_rng(seed).permutation(len(y))
    return _split_at(X[p].astype(float), y[p], 1400)


def covlike(n=60_000, n_test=15_000, seed=7):
    """covtype's kind of rows: 10 unscaled numeric columns (scales 10-1,500 around means up to ~2,900) and two
    one-hot groups (4 and 40 levels), 54 columns; two classes from a noisy score of three of them."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    scale = np.array([300, 100, 10, 200, 50, 1500, 20, 20, 40, 1300])
    mean = np.array([2900, 150, 14, 270, 45, 2300, 210, 220, 140, 1900])
    num = rng.normal(size=(m, 10)) * scale + mean
    g1 = rng.integers(0, 4, m)
    g2 = rng.integers(0, 40, m)
    oh = np.zeros((m, 44))
    oh[np.arange(m), g1] = 1
    oh[np.arange(m), 4 + g2] = 1
    X = np.hstack([num, oh])
    z = (num[:, 0] - 2900) / 300 + 0.5 * (num[:, 5] - 2300) / 1500 + 0.3 * (g2 % 3 - 1) + rng.normal(size=m)
    return _split_at(X, (z > 0.3).astype(int), n)


def covlike7(n=60_000, n_test=15_000, seed=17):
    """:func:`covlike`'s rows with 7 classes, by quantiles of a noisy score."""
    X, _, Xt, _, _ = covlike(n, n_test, seed)
    rng = np.random.default_rng(seed)
    Z = np.vstack([X, Xt])
    z = (Z[:, 0] - 2900) / 300 + 0.5 * (Z[:, 5] - 2300) / 1500 + (Z[:, 14:54].argmax(1) % 5 - 2) * 0.3
    z = z + rng.normal(size=len(Z))
    lab = np.searchsorted(np.quantile(z, [0.1, 0.3, 0.5, 0.65, 0.8, 0.9]), z)
    return _split_at(Z, lab, n)


def genes(n=300, n_test=100, d=5000, seed=18):
    """The gene-expression shape: 300 + 100 rows x 5,000 unscaled lognormal columns, 40 of them 1.5x larger in
    one class."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    y = rng.integers(0, 2, m)
    X = rng.lognormal(mean=3.0, sigma=1.0, size=(m, d))
    X[:, :40] *= np.where(y[:, None] == 1, 1.5, 1.0)
    return _split_at(X, y, n)


def textmeta(seed=5):
    """:func:`text2` plus 6 dense numeric columns in every row (length, a constant, Gaussian, exponential, ...):
    TF-IDF with metadata."""
    import scipy.sparse as sp

    Xtr, ytr, Xte, yte, _ = text2()
    rng = np.random.default_rng(seed)

    def meta(X):
        k = X.shape[0]
        nz = np.diff(X.indptr).astype(float)
        cols = [nz / 60, np.ones(k), rng.normal(size=k), rng.exponential(size=k), np.log1p(nz), rng.random(k)]
        return sp.hstack([X, sp.csr_matrix(np.column_stack(cols))], format="csr")

    return meta(Xtr), ytr, meta(Xte), yte, dict(C=1.0, gamma=1.0)


def emptyrows(seed=6):
    """:func:`text2` with 30% of the rows (train and test) emptied."""
    Xtr, ytr, Xte, yte, _ = text2()
    rng = np.random.default_rng(seed)

    def empty(X):
        X = X.tolil(copy=True)
        for i in np.flatnonzero(rng.random(X.shape[0]) < 0.3):
            X.rows[i] = []
            X.data[i] = []
        return X.tocsr()

    return empty(Xtr), ytr, empty(Xte), yte, dict(C=1.0, gamma=1.0)


def categories(n=200_000, n_test=50_000, seed=41):
    """Categorical rows one-hot encoded (census or click logs): 8 fields of 2 to 12 levels drawn with skewed
    frequencies, 50 binary CSR columns, 8 ones a row, so rows repeat (27% of the training rows are distinct (x, y));
    two classes from a noisy sum of per-level effects."""
    rng = np.random.default_rng(seed)
    m = n + n_test
    levels = (2, 3, 4, 5, 6, 8, 10, 12)
    cols, score, start = [], np.zeros(m), 0
    for k in levels:
        p = 1.0 / np.arange(1, k + 1) ** 1.6
        v = rng.choice(k, size=m, p=p / p.sum())
        score += rng.normal(size=k)[v]
        cols.append(start + v)
        start += k
    indices = np.stack(cols, axis=1).astype(np.int32).ravel()
    import scipy.sparse as sp

    indptr = np.arange(0, indices.shape[0] + 1, len(levels))
    X = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), (m, start))
    y = (score + 1.5 * rng.normal(size=m) > 0).astype(int)
    return _split_at(X, y, n)


def survey(n=200_000, n_test=50_000, seed=44):
    """Survey answers one-hot encoded: 6 questions of 8 answers each, drawn with Zipf-like frequencies, 48 binary
    CSR columns, 6 ones a row, so rows repeat (30% of the training rows distinct (x, y)); 10 classes from a noisy argmax
    of per-answer effects (multi-class repeated rows, session 44)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = n + n_test
    fields, levels, k = 6, 8, 10
    p = 1.0 / np.arange(1, levels + 1) ** 1.6
    v = rng.choice(levels, size=(m, fields), p=p / p.sum())
    indices = (v + np.arange(fields) * levels).astype(np.int32).ravel()
    X = sp.csr_matrix(
        (np.ones(indices.shape[0]), indices, np.arange(0, indices.shape[0] + 1, fields)), (m, fields * levels)
    )
    effects = rng.normal(size=(fields * levels, k))
    y = np.argmax(np.asarray(X @ effects) + 1.5 * rng.gumbel(size=(m, k)), axis=1)
    return _split_at(X, y, n)


def _planted_classes(rng, X, k, noise):
    """Labels of ``k`` classes: the argmax over planted class weights (Gaussian, one column a class) of the rows' scores
    plus Gaussian noise of scale ``noise``."""
    n, d = X.shape
    return np.argmax(np.asarray(X @ rng.normal(size=(d, k))) + noise * rng.normal(size=(n, k)), axis=1)


def _planted_text(seed, n, d, words, k, noise, n_train, zipf=1.2, raw=False):
    """Rows of :func:`_bow52` (``words`` draws a row over ``d`` words; raw counts as float64 where ``raw``) labelled
    by :func:`_planted_classes` in ``k`` classes, split after ``n_train`` rows: the many-class text sets' recipe."""
    rng = np.random.default_rng(seed)
    X = _bow52(rng, n, d, words, zipf=zipf, raw=raw)
    y = _planted_classes(rng, X, k, noise)
    X = _int32(X)
    return _split_at(X.astype(np.float64) if raw else X, y, n_train)


def _bow52(rng, n, d, mean_nnz, zipf=1.2, raw=False):
    """Session 52's bag of words: each row ``1 + Poisson(mean_nnz)`` word draws from a Zipf law (``zipf``) folded
    into ``d`` columns, the distinct words kept; values ``log1p(3 u)`` rows scaled to unit length, or with ``raw`` the
    counts of each word as they are."""
    import scipy.sparse as sp

    nnz = rng.poisson(mean_nnz, n) + 1
    inds, vals, ptr = [], [], [0]
    for k in nnz:
        u, c = np.unique(rng.zipf(zipf, k) % d, return_counts=True)
        inds.append(u)
        vals.append(c)
        ptr.append(ptr[-1] + len(u))
    ind = np.concatenate(inds)
    val = np.concatenate(vals).astype(float) if raw else np.log1p(rng.random(len(ind)) * 3)
    X = sp.csr_matrix((val, ind, np.array(ptr)), shape=(n, d))
    if raw:
        return X
    X = sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X
    X = X.tocsr()
    X.sort_indices()
    return X


def classes100s(seed=52):
    """100 classes of short sparse rows (session 52): 50k + 10k rows over 10,000 words, ~20 a row, labels the argmax
    of planted class weights plus noise."""
    rng = np.random.default_rng(seed)
    X = _bow52(rng, 60_000, 10_000, 20)
    y = np.argmax(np.asarray(X @ rng.normal(size=(10_000, 100))) + 0.3 * rng.normal(size=(60_000, 100)), axis=1)
    return _split_at(_int32(X), y, 50_000)


def veryshort(seed=52):
    """Three uniform features of 1,000,000 a row (session 52): 350k + 50k binary rows, labels from planted weights
    plus noise."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, k = 400_000, 3
    idx = np.sort(rng.integers(0, 1_000_000, size=(n, k)), axis=1)
    X = sp.csr_matrix((np.ones(n * k), idx.ravel(), np.arange(0, n * k + 1, k)), shape=(n, 1_000_000))
    X.sum_duplicates()
    y = np.sign(np.asarray(X @ rng.normal(size=1_000_000)).ravel() + 0.5 * rng.normal(size=n))
    return _split_at(_int32(X), y, 350_000)


def zipfshort(seed=66):
    """Very sparse rows over a Zipf vocabulary (session 66): 350k + 50k rows of 1 + Poisson(0.5) distinct words of
    200,000 (exponent 0.8: the frequent words in most rows, 150,000 words used), TF-IDF rows of unit length -- over
    half the rows one word, so most values are 1; two classes from a planted score plus noise, split at its median.
    Unlike ``veryshort`` (uniform features of 1,000,000, every weight a cache miss), the weights in use fit in a
    core's cache, and the rows are too short for the passes' prefetch to pay."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 400_000, 200_000
    lens = 1 + rng.poisson(0.5, n)
    p = 1.0 / np.arange(1, d + 1) ** 0.8
    cols = rng.choice(d, size=int(lens.sum()), p=p / p.sum())
    X = sp.csr_matrix((np.ones(cols.shape[0]), (np.repeat(np.arange(n), lens), cols)), shape=(n, d))
    X.sum_duplicates()
    X.data = np.log1p(X.data) * np.log(n / (1.0 + np.bincount(X.indices, minlength=d)))[X.indices]
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X)
    s = np.asarray(X @ rng.normal(size=d)).ravel() + 0.3 * rng.normal(size=n)
    y = np.where(s > np.median(s), 1, -1)
    return _split_at(_int32(X), y, 350_000)


def onehot12k(seed=67):
    """Small one-hot categorical data (session 67, mushrooms' kind but fresh): 12,000 + 3,000 rows of 16 attributes of
    2-11 levels drawn with Dirichlet frequencies, 107 binary CSR columns, 16 ones a row, no row repeated; two classes
    from a planted sum of per-level effects (no noise: nearly separable).  ``LinearSVC()``'s default primal (tol 1e-4)
    took 10-17 CG products an iteration near the optimum here (the case for ``tron``'s direct steps)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m = 16_000
    levels = rng.integers(2, 12, 16)
    cols, score, start = [], np.zeros(m), 0
    for k in levels:
        v = rng.choice(k, size=m, p=rng.dirichlet(np.ones(k)))
        score += rng.normal(size=k)[v]
        cols.append(start + v)
        start += int(k)
    idx = np.stack(cols, axis=1)
    _, first = np.unique(idx, axis=0, return_index=True)
    keep = np.sort(first)[:15_000]  # (no repeated rows, as mushrooms)
    idx, score = idx[keep], score[keep]
    indices = idx.astype(np.int32).ravel()
    X = sp.csr_matrix(
        (np.ones(indices.shape[0]), indices, np.arange(0, indices.shape[0] + 1, len(levels))), (idx.shape[0], start)
    )
    y = np.where(score > np.median(score), 1, -1)
    return _split_at(X, y, 12_000)


def rawcounts(seed=52):
    """Unnormalised term counts (session 52): 20k + 5k rows over 50,000 words, ~80 draws a row (counts up to
    dozens), two classes from a planted score."""
    rng = np.random.default_rng(seed)
    n = 25_000
    X = _bow52(rng, n, 50_000, 80, zipf=1.15, raw=True)
    s = np.asarray(X @ rng.normal(size=50_000)).ravel()
    y = np.sign(s - np.median(s) + 2 * rng.normal(size=n))
    return _split_at(_int32(X), y, 20_000)


def bowf32(seed=52):
    """Float32 bag of words (session 52): 50k + 10k unit rows over 30,000 words, ~60 a row, two classes."""
    rng = np.random.default_rng(seed)
    X = _bow52(rng, 60_000, 30_000, 60).astype(np.float32)
    y = np.sign(np.asarray(X @ rng.normal(size=30_000)).ravel() + 0.05 * rng.normal(size=60_000))
    return _split_at(_int32(X), y, 50_000)


def mixedlen(seed=56):
    """Documents of very mixed length (session 56): 50k + 10k unit TF-IDF-like rows over 100,000 words, lengths
    log-normal (median ~25 distinct words, 1% past 1,000), two classes from a planted score plus noise: a few rows
    hold most of the nonzeros."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 60_000, 100_000
    lengths = np.minimum(np.exp(rng.normal(3.2, 1.2, n)).astype(np.int64) + 1, 5_000)
    ind = (rng.zipf(1.1, lengths.sum()) - 1) % d
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    X = sp.csr_matrix((np.log1p(rng.random(ind.size) * 3), ind, ptr), shape=(n, d))
    X.sum_duplicates()
    X = (sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X).tocsr()
    X.sort_indices()
    y = np.sign(np.asarray(X @ rng.normal(size=d)).ravel() + 0.3 * rng.normal(size=n))
    return _split_at(_int32(X), y, 50_000)


def fewwide(seed=56):
    """Very few rows over very many signed sparse features (session 56, genotype-like): 400 + 100 rows of ~3,000
    standard-normal values over 500,000 columns; labels from 100 planted columns plus noise."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d, k = 500, 500_000, 3_000
    idx = np.sort(rng.choice(d, size=(n, k)), axis=1)
    X = sp.csr_matrix((rng.normal(size=n * k), idx.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
    X.sum_duplicates()
    w = np.zeros(d)
    w[rng.choice(d, 100, replace=False)] = rng.normal(size=100)
    s = np.asarray(X @ w).ravel()
    y = np.sign(s - np.median(s) + 0.1 * s.std() * rng.normal(size=n))
    return _split_at(_int32(X), y, 400)


def multi40(seed=56):
    """40 classes of mid-length documents (session 56): 40k + 10k unit rows over 60,000 words, ~60 draws a row,
    class sizes Zipf-skewed (the largest ~20x the smallest), labels the argmax of planted class scores plus noise."""
    rng = np.random.default_rng(seed)
    n, d, k = 50_000, 60_000, 40
    X = _bow52(rng, n, d, 60)
    bias = 2.0 * np.log(1 + np.arange(k))[::-1] / np.log(k)
    y = np.argmax(np.asarray(X @ rng.normal(size=(d, k))) + bias + 0.5 * rng.normal(size=(n, k)), axis=1)
    return _split_at(_int32(X), y, 40_000)


def binhigh(seed=56):
    """Unscaled binary rows of many ones (session 56): 150k + 30k rows, 40 of 100,000 columns set to 1 (norm ~6.3,
    not unit: the squared norms are 40, as one-hot data of many fields), two classes from planted weights."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d, k = 180_000, 100_000, 40
    idx = np.sort((rng.zipf(1.3, size=(n, k)) - 1) % d, axis=1)
    X = sp.csr_matrix((np.ones(n * k), idx.ravel(), np.arange(0, n * k + 1, k)), shape=(n, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    y = np.sign(np.asarray(X @ rng.normal(size=d)).ravel() + 1.0 * rng.normal(size=n))
    return _split_at(_int32(X), y, 150_000)


def bigrams(seed=5701):
    """Unigrams plus hashed bigrams of Zipf documents (session 57): 20k + 5k unit rows of ~250 of 2**21 features,
    rows' column indices *unsorted* (as a product with a diagonal leaves them), two classes from topic words."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m, vocab, D = 25_000, 50_000, 1 << 21
    y = rng.integers(0, 2, m)
    topic = np.array([rng.choice(vocab // 2, 300, replace=False) for _ in range(2)])
    lengths = rng.poisson(150, m) + 5
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1) ** 1.1)
    cdf /= cdf[-1]
    rows = np.repeat(np.arange(m), lengths)
    w = np.minimum(np.searchsorted(cdf, rng.random(rows.size)), vocab - 1)
    own = rng.random(rows.size) < 0.05
    w[own] = topic[y[rows[own]], np.minimum(rng.zipf(1.3, int(own.sum())) - 1, 299)]
    same = rows[1:] == rows[:-1]
    pairs = ((w[:-1].astype(np.int64) * 1_000_003 + w[1:]) % (D - vocab) + vocab)[same]
    X = sp.csr_matrix((np.ones(rows.size + pairs.size), (np.r_[rows, rows[:-1][same]], np.r_[w, pairs])), (m, D))
    X.sum_duplicates()
    X.data = 1.0 + np.log(X.data)
    # unit rows by a product with a diagonal, which leaves each row's column indices unsorted (on purpose: the
    # shape's point; scikit-learn's normalize would keep them sorted)
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X)
    return _split_at(_int32(X), np.where(y == 1, 1, -1), 20_000)


def dupes(seed=5702):
    """Rows that repeat (session 57): 150k + 30k rows drawn from 8,000 distinct unit rows (30 of 5,000 features),
    each copy's label flipped with probability 0.1."""
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    rng = np.random.default_rng(seed)
    U = normalize(sp.random(8_000, 5_000, density=0.006, random_state=seed, data_rvs=rng.random, format="csr"))
    s = U @ rng.normal(size=5_000)
    pick = rng.integers(0, 8_000, 180_000)
    y = np.where(s > np.median(s), 1, -1)[pick] * np.where(rng.random(180_000) < 0.1, -1, 1)
    return _split_at(_int32(U[pick]), y, 150_000)


def imb15(seed=5703):
    """15 classes of Zipf sizes (session 57; the largest ~35%, the smallest ~1.5%): 40k + 10k TF-IDF rows of ~60
    words over 20,000."""
    rng = np.random.default_rng(seed)
    m, k = 50_000, 15
    p = 1.0 / np.arange(1, k + 1) ** 1.2
    y = rng.choice(k, m, p=p / p.sum())
    topic = [rng.choice(10_000, 200, replace=False) for _ in range(k)]
    X = _zipf_words(rng, rng.poisson(60, m) + 3, 20_000, [topic[c] for c in y], 0.08)
    Xtr, idf = _tfidf(X[:40_000])
    Xte, _ = _tfidf(X[40_000:], idf)
    return _int32(Xtr), y[:40_000], _int32(Xte), y[40_000:], dict(C=1.0, gamma="scale")


def densecsr(seed=5704):
    """Rows 30% dense stored as CSR (session 57): 30k + 10k rows x 500 Gaussian values, two classes from a planted
    direction plus noise."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(40_000, 500, density=0.3, random_state=seed, format="csr", data_rvs=rng.standard_normal)
    y = np.where(X @ rng.normal(size=500) + 3.0 * rng.normal(size=40_000) > 0, 1, -1)
    return _split_at(_int32(X), y, 30_000)


def tags8(seed=5705):
    """8 classes on rows of 1-4 binary features (session 57; tags or query terms): 300k + 50k rows over 30,000
    columns of Zipf use, the last column collecting the Zipf tail (in ~45% of the rows), labels the argmax of planted
    class scores plus noise.  Crammer-Singer ran into max_iter here until session 57 (a multiplier a rounding error
    below its bound)."""
    return _tag_rows(seed, 350_000, 8, 300_000)


def tags100(seed=6401):
    """100 classes on rows of 1-4 binary features (session 64): tags8's rows with a hundred classes, 200k + 40k
    rows.  Many classes and very short rows at once."""
    return _tag_rows(seed, 240_000, 100, 200_000)


def _tag_rows(seed, m, k, n_train, d=30_000):
    """``m`` rows of 1-4 binary features over ``d`` columns of Zipf use (the tail in the last column), ``k`` classes
    from planted scores plus noise; the first ``n_train`` rows for training."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, m)
    rows = np.repeat(np.arange(m), lengths)
    cols = np.minimum(rng.zipf(1.15, rows.size) - 1, d - 1)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(m, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    y = np.argmax(X @ rng.normal(size=(d, k)) + 1.5 * rng.normal(size=(m, k)), axis=1)
    return _split_at(_int32(X), y, n_train)


def lowrank(seed=5706):
    """Dense, unscaled and nearly low-rank (session 57): 50k + 10k rows x 200 columns, 100 x (5 factors + 1% noise),
    labels from two of the factors plus noise.  The hinge loss's dual epochs take ~1,500 epochs here."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(60_000, 5))
    X = 100.0 * (Z @ rng.normal(size=(5, 200)) + 0.01 * rng.normal(size=(60_000, 200)))
    y = np.where(Z[:, 0] + 0.5 * Z[:, 1] + 0.3 * rng.normal(size=60_000) > 0, 1, -1)
    return _split_at(X, y, 50_000)


def classes1k(seed=5801):
    """A thousand classes of short documents (session 58; product categories, intents): 30k + 6k unit TF-IDF rows
    of ~40 words over 20,000, each class 30 topic words of its own drawn 40% of the time; ~30 training rows a
    class.  One-vs-rest makes a thousand binary problems of all 30k rows."""
    return _wide_text(30_000, 6_000, 20_000, 37, 30, 0.4, seed, n_classes=1_000)


def normspread(seed=5802):
    """Sparse signed rows whose norms spread over four orders of magnitude (session 58; sensor or difference
    features nobody scaled): 80k + 20k rows of 20-60 of 50,000 columns (Zipf use), N(0, 1) values times a
    log-normal row scale (sigma 1.5); labels from planted weights on the rows' directions plus noise."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m, d = 100_000, 50_000
    lengths = rng.integers(20, 61, m)
    rows = np.repeat(np.arange(m), lengths)
    cols = np.minimum(rng.zipf(1.2, rows.size) - 1, d - 1)
    X = sp.csr_matrix((rng.normal(size=rows.size), (rows, cols)), shape=(m, d))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()) + 1e-12
    s = (X @ rng.normal(size=d)) / norms
    y = np.where(s + 0.5 * rng.normal(size=m) > 0, 1, -1)
    X = sp.diags(rng.lognormal(0.0, 1.5, m)) @ X
    X = X.tocsr()
    X.sort_indices()
    return _split_at(_int32(X), y, 80_000)


def tallf32(seed=5803):
    """Tall dense float32 rows (session 58; features exported by a float32 pipeline): 400k + 50k rows x 24,
    two overlapping classes along a planted direction, some columns correlated; LinearSVC keeps float32."""
    rng = np.random.default_rng(seed)
    m, d = 450_000, 24
    Z = rng.normal(size=(m, d))
    Z[:, 12:] += 0.8 * Z[:, :12]
    y = np.where(Z @ rng.normal(size=d) + 1.5 * rng.normal(size=m) > 0, 1, -1)
    return _split_at(Z.astype(np.float32), y, 400_000)


def ctrmix(seed=5804):
    """Click-log rows that mix scales (session 58): 250k + 50k rows, one level of each of 24 categorical fields
    (one-hot, cardinalities from 5 to 40,000, Zipf-used levels) beside 4 unscaled count columns (log-normal, up to
    ~10^4: impressions, dwell times), the top 3% of a planted score plus logistic noise positive."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    m, fields = 300_000, 24
    cards = np.unique(np.geomspace(5, 40_000, fields).astype(int))
    offsets = 4 + np.r_[0, np.cumsum(cards)[:-1]]
    d = int(4 + cards.sum())
    levels = np.stack([np.minimum(rng.zipf(1.3, m) - 1, c - 1) for c in cards], axis=1)
    counts = np.round(rng.lognormal(2.0, 1.8, size=(m, 4)))
    rows = np.repeat(np.arange(m), 4 + cards.size)
    cols = np.concatenate([np.tile(np.arange(4), (m, 1)), levels + offsets], axis=1).ravel()
    vals = np.concatenate([counts, np.ones((m, cards.size))], axis=1).ravel()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(m, d))
    X.eliminate_zeros()
    score = X[:, 4:] @ rng.normal(0, 0.8, size=d - 4) + 0.3 * np.log1p(counts) @ rng.normal(size=4)
    score += rng.logistic(size=m)
    y = np.where(score > np.quantile(score, 0.97), 1, -1)
    return _split_at(_int32(X), y, 250_000)


def regout(seed=5805):
    """Regression with gross outliers (session 58): 100k + 20k dense rows x 40, target from planted weights plus
    noise of 0.5, and 2% of the training targets shifted by +-50 (the test targets clean)."""
    rng = np.random.default_rng(seed)
    m, n, d = 120_000, 100_000, 40
    X = rng.normal(size=(m, d))
    y = X @ rng.normal(size=d) + 0.5 * rng.normal(size=m)
    bad = np.flatnonzero(rng.random(n) < 0.02)
    y[bad] += rng.choice([-50.0, 50.0], bad.size)
    return X[:n], y[:n], X[n:], y[n:], dict(C=1.0)


def manydense(seed=5806):
    """Many classes on tall dense rows (session 58; 300 fine-grained labels over 64-D embeddings): 90k + 15k rows
    around 300 class centres of Zipf-sized classes, unit-variance spread."""
    rng = np.random.default_rng(seed)
    m, d, k = 105_000, 64, 300
    sizes = 1.0 / np.arange(1, k + 1) ** 0.8
    y = rng.choice(k, size=m, p=sizes / sizes.sum())
    X = 1.2 * rng.normal(size=(k, d))[y] + rng.normal(size=(m, d))
    return _split_at(X, y, 90_000)


def sparse200c(seed=60):
    """Very sparse rows in 200 classes over 2**20 columns (session 60): 100k + 20k binary rows of 5 ones, two from
    the class's 40 prototype columns and three at random (mostly columns of one row), class sizes Zipf-skewed: the
    one-vs-rest weights are 200 x 2**20."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d, k = 120_000, 1 << 20, 200
    cols = rng.integers(0, d, size=(n, 5))
    proto = rng.integers(0, d, size=(k, 40))
    y = rng.zipf(1.5, n) % k
    cols[:, :2] = proto[y[:, None], rng.integers(0, 40, size=(n, 2))]
    cols.sort(axis=1)
    X = sp.csr_matrix((np.ones(n * 5), cols.ravel(), np.arange(0, n * 5 + 1, 5)), shape=(n, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    return _split_at(_int32(X), y, 100_000)


def hash32(seed=60):
    """Hashed unit rows kept as float32 with 64-bit indices (session 60): 64k + 16k rows of ~80 of 2**20 columns
    at random (no column dominant, few in one row only), two classes from 20,000 planted weights."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 80_000, 1 << 20
    lengths = rng.poisson(80, n) + 1
    ind = rng.integers(0, d, lengths.sum()).astype(np.int64)
    ptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    X = sp.csr_matrix((rng.random(ind.size).astype(np.float32), ind, ptr), shape=(n, d))
    X.sum_duplicates()
    X = (sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())).astype(np.float32) @ X).tocsr()
    X.sort_indices()
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    w = np.zeros(d)
    w[rng.integers(0, d, 20_000)] = rng.normal(size=20_000)
    y = np.sign(X @ w + 0.02 * rng.normal(size=n))
    return _split_at(X, y, 64_000)


def heavyc(seed=60):
    """Text-like unit rows meant for a large C (session 60; ``bench_linear`` fits it at C = 10): 24k + 6k rows of
    ~120 Zipf draws over 30,000 words, log counts, two classes from planted weights (separable at that C)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 30_000, 30_000
    lengths = rng.poisson(120, n) + 1
    ind = (rng.zipf(1.2, lengths.sum()) - 1) % d
    X = sp.csr_matrix((np.ones(ind.size), ind, np.r_[0, np.cumsum(lengths)]), shape=(n, d))
    X.sum_duplicates()
    X.data = np.log1p(X.data)
    X = (sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())) @ X).tocsr()
    X.sort_indices()
    y = np.sign(X @ rng.normal(size=d) + 0.2 * rng.normal(size=n))
    return _split_at(_int32(X), y, 24_000)


def colscale(seed=60):
    """30%-dense CSR rows whose columns differ in scale by four orders of magnitude (session 60): 40k + 10k rows
    x 300 columns, each column scaled by 10**U(-2, 2), two classes from weights scaled inversely."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 50_000, 300
    X = sp.random(n, d, density=0.3, format="csr", random_state=seed, data_rvs=rng.standard_normal)
    X = (X @ sp.diags(10 ** rng.uniform(-2, 2, d))).tocsr()
    X.sort_indices()
    y = np.sign(X @ (rng.normal(size=d) / 10 ** rng.uniform(-2, 2, d)) + 0.5 * rng.normal(size=n))
    return _split_at(_int32(X), y, 40_000)


def tall4(seed=61):
    """Click logs at scale (session 61): 1.4M + 100k binary rows of 6 hashed features uniform over 2**22 columns
    (no column hot, 12% of the columns unused), two classes from weights on 5% of the columns: the weight vectors
    (32 MB each) miss every cache, the Newton method's passes are latency-bound."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 1_500_000, 1 << 22
    cols = np.sort(rng.integers(0, d, size=(n, 6)), axis=1)
    X = sp.csr_matrix((np.ones(n * 6), cols.ravel(), np.arange(0, n * 6 + 1, 6)), shape=(n, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    w = rng.normal(size=d) * (rng.random(d) < 0.05)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 1_400_000)


def textbig(seed=61):
    """A large text set (session 61): 270k + 30k unit-norm log-count documents of ~150 Zipf(1.1) terms over 200,000,
    two classes from dense planted weights."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = 300_000, 200_000
    lengths = rng.poisson(150, n) + 1
    ind = (rng.zipf(1.1, lengths.sum()) - 1) % d
    ptr = np.r_[0, np.cumsum(lengths)]
    X = sp.csr_matrix((np.ones(ind.size), ind, ptr), shape=(n, d))
    X.sum_duplicates()
    X.data = np.log1p(X.data)
    X = (sp.diags(1 / np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())) @ X).tocsr()
    X.sort_indices()
    y = np.where(X @ rng.normal(size=d) + 0.2 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 270_000)


# session 73: shapes nobody tuned on (sweep_linear.py; each a LIBLINEAR comparison of its own seed)


def tweets5(seed=7311):
    """Short hashed rows, few positives (session 73): 150k + 30k rows of ~9.5 words (Zipf 1.1) over 2**18 columns,
    5% positives, labels from planted weights plus noise."""
    rng = np.random.default_rng(seed)
    n, d = 180_000, 1 << 18
    X = _bow52(rng, n, d, 9, zipf=1.1)
    s = np.asarray(X @ rng.normal(size=d)).ravel() + 0.3 * rng.normal(size=n)
    return _split_at(_int32(X), np.where(s > np.quantile(s, 0.95), 1, -1), 150_000)


def tags120(seed=7312):
    """Rows of ~6 words labelled by 120 planted classes with Zipf-like priors (session 73): 25k + 5k rows over 20,000
    words; 21 of the classes occur in the training rows, the commonest in 75% of them."""
    rng = np.random.default_rng(seed)
    n, d, k = 30_000, 20_000, 120
    X = _bow52(rng, n, d, 5)
    prior = -1.5 * np.log(np.arange(1, k + 1))
    y = np.argmax(np.asarray(X @ rng.normal(size=(d, k))) + prior + 0.3 * rng.normal(size=(n, k)), axis=1)
    return _split_at(_int32(X), y, 25_000)


def onehot8(seed=7313):
    """Eight categorical variables of 50 geometric-frequency levels, one-hot (session 73): 250k + 50k binary rows of
    8 ones over 400 columns, many rows repeated."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, v, levels = 300_000, 8, 50
    cats = np.minimum(rng.geometric(0.15, size=(n, v)) - 1, levels - 1) + levels * np.arange(v)
    X = sp.csr_matrix((np.ones(n * v), cats.ravel(), np.arange(0, n * v + 1, v)), shape=(n, v * levels))
    y = np.where(np.asarray(X @ rng.normal(size=v * levels)).ravel() + rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 250_000)


def regwide17(seed=7314):
    """Regression on wide sparse rows (session 73): 40k + 8k rows of ~27 words (Zipf 1.1) over 2**17 columns, a
    planted dense linear target plus noise of sd 0.2."""
    rng = np.random.default_rng(seed)
    n, d = 48_000, 1 << 17
    X = _bow52(rng, n, d, 30, zipf=1.1)
    y = np.asarray(X @ rng.normal(size=d)).ravel() + 0.2 * rng.normal(size=n)
    return _split_at(_int32(X), y, 40_000)


def dense6c(seed=7315):
    """Six classes on 100 correlated dense features (session 73): 40k + 8k rows, Gaussian classes mixed by a random
    matrix."""
    rng = np.random.default_rng(seed)
    n, d, k = 48_000, 100, 6
    M = rng.normal(size=(d, d)) / np.sqrt(d)
    y = rng.integers(0, k, n)
    X = (rng.normal(size=(k, d))[y] * 0.3 + rng.normal(size=(n, d))) @ M
    return _split_at(X, y, 40_000)


def textc10(seed=7316):
    """Binary text for a large C (session 73; run at ``--C 10``): 20k + 4k rows of ~80 words over 100,000."""
    rng = np.random.default_rng(seed)
    n, d = 24_000, 100_000
    X = _bow52(rng, n, d, 80)
    y = np.where(np.asarray(X @ rng.normal(size=d)).ravel() + 0.2 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 20_000)


# session 74: shapes nobody tuned on (sweep_linear.py; seeds of their own)
def hugevocab(seed=7403):
    """Long documents over a huge vocabulary (session 74): 12k + 3k rows of ~176 distinct words (Zipf 1.05) over
    2**20 columns; 17% of the values in words of one row."""
    rng = np.random.default_rng(seed)
    n, d = 15_000, 1 << 20
    X = _bow52(rng, n, d, 200, zipf=1.05)
    y = np.where(np.asarray(X @ rng.normal(size=d)).ravel() + 0.2 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 12_000)


def many300(seed=7401):
    """300 classes, every one in play (session 74): 60k + 12k rows of ~11 words over 30,000, labels the argmax of
    planted class weights plus noise."""
    return _planted_text(seed, 72_000, 30_000, 12, 300, 0.3, 60_000)


def tabmix(seed=7402):
    """Tabular rows (session 74): 10 standardised numeric columns and 6 one-hot fields of 200 Zipf-frequency levels,
    200k + 40k rows."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, f, L = 240_000, 6, 200
    num = rng.normal(size=(n, 10))
    cats = np.minimum(rng.zipf(1.4, size=(n, f)) - 1, L - 1) + L * np.arange(f) + 10
    rows = np.repeat(np.arange(n), 10 + f)
    cols = np.concatenate([np.tile(np.arange(10), (n, 1)), cats], axis=1).ravel()
    vals = np.concatenate([num, np.ones((n, f))], axis=1).ravel()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, 10 + f * L))
    s = np.asarray(X @ rng.normal(size=10 + f * L)).ravel() + rng.normal(size=n)
    return _split_at(_int32(X), np.where(s > 0.5, 1, -1), 200_000)


def onetwo(seed=7404):
    """Rows of 1-3 values (session 74): 400k + 80k rows over 50,000 columns (Zipf 1.3)."""
    rng = np.random.default_rng(seed)
    n, d = 480_000, 50_000
    X = _bow52(rng, n, d, 1, zipf=1.3)
    y = np.where(np.asarray(X @ rng.normal(size=d)).ravel() + 0.5 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(_int32(X), y, 400_000)


def cs30(seed=7406):
    """30 classes of text (session 74): 20k + 4k rows of ~40 words over 60,000, labels the argmax of planted class
    weights plus noise."""
    return _planted_text(seed, 24_000, 60_000, 60, 30, 0.3, 20_000)


def rawcs(seed=7509):
    """Crammer-Singer on raw term counts (session 75): 30k + 6k rows of ~80 word draws over 50,000 words, the counts as
    they are (up to dozens; squared row norms in the thousands), labels the argmax of 12 planted class weights plus
    noise (10 classes come up).  Ill-conditioned for the dual: ~230 epochs at tol 0.1, against ~50 on unit rows."""
    return _planted_text(seed, 36_000, 50_000, 80, 12, 1.0, 30_000, raw=True)


def raretext(seed=7503):
    """Rare positives on text (session 75): 100k + 20k rows of ~23 words over 40,000, the top 1% of a planted score
    positive; values not exactly float32 (unit rows), so every pass reads 12 bytes a value."""
    rng = np.random.default_rng(seed)
    n, d = 120_000, 40_000
    X = _bow52(rng, n, d, 30)
    s = np.asarray(X @ rng.normal(size=d)).ravel() + 0.2 * rng.normal(size=n)
    return _split_at(_int32(X), np.where(s > np.quantile(s, 0.99), 1, -1), 100_000)


def halfzero(seed=7506):
    """Dense rows whose half of the columns are all zero (session 75): 6k + 1k rows x 3,000 Gaussian columns, 1,500 of
    them zeroed (a dense array of unused features); LIBLINEAR's interface drops the zeros."""
    rng = np.random.default_rng(seed)
    n, d = 7_000, 3_000
    X = rng.normal(size=(n, d)) * (rng.random(d) < 0.5)
    y = np.where(X @ rng.normal(size=d) + 3 * rng.normal(size=n) > 0, 1, -1)
    return _split_at(X, y, 6_000)


def shortcs(seed=7501):
    """50 classes on short rows (session 75): 200k + 40k rows of ~5 words over 20,000, labels the argmax of planted
    class weights plus noise; Crammer-Singer's sub-problems on rows of a few values."""
    return _planted_text(seed, 240_000, 20_000, 5, 50, 0.3, 200_000)


def tfidf30(seed=7610):
    """30 classes on long text rows (session 76): 30k + 6k unit rows of ~120 word draws (96 distinct) over 100,000
    words, labels the argmax of planted class weights plus noise; Crammer-Singer keeps most classes in play for most
    of its ~14 epochs, 3-6 us a sample (24 MB of weights)."""
    return _planted_text(seed, 36_000, 100_000, 120, 30, 0.5, 30_000, zipf=1.1)


def countreg(seed=7604):
    """LinearSVR on raw term counts (session 76): 50k + 10k rows of ~60 word draws over 40,000 words, the counts as
    they are, a planted linear target plus noise; LIBLINEAR's L1-loss dual stops at its 1,000 epochs unconverged."""
    rng = np.random.default_rng(seed)
    n, d = 60_000, 40_000
    X = _bow52(rng, n, d, 60, raw=True)
    y = np.asarray(X @ (rng.normal(size=d) * 0.1)).ravel() + 0.5 * rng.normal(size=n)
    return _split_at(_int32(X).astype(np.float64), y, 50_000)


def long60(seed=7701):
    """60 classes on long rows (session 77): 12k + 2k unit rows of ~300 word draws (259 distinct) over 200,000
    words, labels the argmax of planted class weights plus noise; one-vs-rest makes 60 problems of long rows, and
    Crammer-Singer reads 92 MB of weights, most classes in play."""
    return _planted_text(seed, 14_000, 200_000, 300, 60, 0.5, 12_000, zipf=1.05)


def text10(seed=7710):
    """10 classes of text rows (session 77): 20k + 4k unit rows of ~80 word draws (66 distinct) over 60,000 words,
    labels the argmax of planted class weights plus noise.  At C = 10 (``sweep_linear.py text10/cs --C 10``)
    Crammer-Singer keeps nearly every sample and half the classes in play for its ~25 epochs."""
    return _planted_text(seed, 24_000, 60_000, 80, 10, 0.5, 20_000, zipf=1.1)


LOADERS.update(
    text2=text2,
    dense2k=dense2k,
    hashed300k=hashed300k,
    tall200k=tall200k,
    pendigits=pendigits,
    letter26=letter26,
    text100=text100,
    sparse40k=sparse40k,
    zipf50=zipf50,
    easy20k=easy20k,
    classes300=classes300,
    wide400=wide400,
    imbal100k=imbal100k,
    mid64=mid64,
    emb128=emb128,
    emb100c=emb100c,
    clicks=clicks,
    abstracts=abstracts,
    short_text=short_text,
    classes200=classes200,
    news20b=news20b,
    rcv1b=rcv1b,
    realsim=realsim,
    longdocs=longdocs,
    tweets=tweets,
    news20m=news20m,
    # session 38
    tiny=tiny,
    cancer=cancer,
    digits=digits,
    covlike=covlike,
    covlike7=covlike7,
    genes=genes,
    textmeta=textmeta,
    emptyrows=emptyrows,
    # session 41
    categories=categories,
    # session 44
    survey=survey,
    # session 52
    classes100s=classes100s,
    veryshort=veryshort,
    rawcounts=rawcounts,
    bowf32=bowf32,
    # session 56
    mixedlen=mixedlen,
    fewwide=fewwide,
    multi40=multi40,
    binhigh=binhigh,
    # session 57
    bigrams=bigrams,
    dupes=dupes,
    imb15=imb15,
    densecsr=densecsr,
    tags8=tags8,
    tags100=tags100,
    lowrank=lowrank,
    classes1k=classes1k,
    normspread=normspread,
    tallf32=tallf32,
    ctrmix=ctrmix,
    regout=regout,
    manydense=manydense,
    # session 60
    sparse200c=sparse200c,
    hash32=hash32,
    heavyc=heavyc,
    colscale=colscale,
    # session 61
    tall4=tall4,
    textbig=textbig,
    # session 66
    zipfshort=zipfshort,
    onehot12k=onehot12k,
    # session 73
    tweets5=tweets5,
    tags120=tags120,
    onehot8=onehot8,
    regwide17=regwide17,
    dense6c=dense6c,
    textc10=textc10,
    # session 74
    hugevocab=hugevocab,
    many300=many300,
    tabmix=tabmix,
    onetwo=onetwo,
    cs30=cs30,
    # session 75
    rawcs=rawcs,
    raretext=raretext,
    halfzero=halfzero,
    shortcs=shortcs,
    # session 76
    tfidf30=tfidf30,
    countreg=countreg,
    long60=long60,
    text10=text10,
)

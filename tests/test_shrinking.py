"""Shrinking in the coordinate-descent epochs (``_linear_common.KEEP_THRESHOLDS``): the epochs keep the visiting order
when they drop a variable; the classifier's dual checks every row at one point when its active rows meet ``tol``
(``dual_cd.settled_rows``); the regression dual's and the L1 penalty's pass over every variable after an unshrink
drops what is settled, and they stop only after such a pass; results against liblinear-official."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import seed_liblinear

from maxmargin.solvers import _linear_common, cd_l1, dual_cd
from maxmargin.solvers._linear_common import linear_data

liblinearutil = pytest.importorskip("liblinear.liblinearutil")


def record(monkeypatch, module, name, k_at, istate_at):
    """Run ``module.name``'s epochs one at a time; the list gets (active at the start, active at the end, code)."""
    log = []
    epochs = getattr(module, name)

    def one_at_a_time(*args):
        args = list(args)
        k = args[k_at]
        args[k_at] = 1
        for _ in range(k):
            start = int(args[istate_at][0])
            code = epochs(*args)
            log.append((start, int(args[istate_at][0]), int(code)))
            if code != 1:
                return code
        return 1

    monkeypatch.setattr(module, name, one_at_a_time)
    return log


def check_epochs(log, n):
    """Converged only at the end of a pass over all ``n`` variables; every pass over all of them that follows epochs on
    fewer (an unshrink) drops some (LIBLINEAR's infinite thresholds there drop none); returns how many unshrinks."""
    assert _linear_common.KEEP_THRESHOLDS
    codes = [c for _, _, c in log]
    assert codes[-1] == 0 and set(codes[:-1]) <= {1}
    assert log[-1][0] == n
    unshrinks = [i for i in range(1, len(log)) if log[i][0] == n and log[i - 1][0] < n]
    assert unshrinks, "the data should make the epochs shrink and bring the variables back"
    for i in unshrinks:
        assert log[i][1] < n, (i, log[i])
    return len(unshrinks)


def rare_positives(n=4000, d=10, seed=0):
    """Dense Gaussian rows as CSR, the top 2% of a noisy planted score positive: the hinge loss's dual shrinks to
    a few dozen rows and comes back to all of them several times."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = X @ rng.normal(size=d) + rng.normal(size=n)
    return sp.csr_matrix(X), np.where(s > np.quantile(s, 0.98), 1.0, -1.0)


def svc_objective(w, X, y, squared):
    xi = np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))
    return 0.5 * w @ w + (xi @ xi if squared else xi.sum())


def projected_gradient(X, y, w, alpha, squared):
    """LIBLINEAR's projected gradient of the classifier's dual at ``alpha`` (``w`` with the bias last)."""
    diag = 0.5 if squared else 0.0
    upper = np.inf if squared else 1.0
    G = y * (X @ w[:-1] + w[-1]) - 1.0 + diag * alpha
    return G, np.where(alpha <= 0.0, np.minimum(G, 0.0), np.where(alpha >= upper, np.maximum(G, 0.0), G))


@pytest.mark.parametrize("squared", [False, True], ids=["hinge", "squared_hinge"])
def test_svc_checks_every_row_at_one_point(squared, monkeypatch):
    """The classifier's epochs stop when the active rows meet ``tol`` (code 2); every row is then checked at that
    ``w`` (``settled_rows``) instead of an epoch over all of them: the epochs never again run over every row, and the
    returned point meets the stopping test over every row exactly."""
    X, y = rare_positives(8000, 20)  # (the first check fails here, the second holds)
    n = y.shape[0]
    ld = linear_data(X, 1.0)
    log = record(monkeypatch, dual_cd, "_svc_epochs_rec", 11, 7)
    checks = []
    settled = dual_cd.settled_rows

    def counted(*args):
        out = settled(*args)
        checks.append(out)
        return out

    monkeypatch.setattr(dual_cd, "settled_rows", counted)
    fit = dual_cd.solve_svc(ld, y, np.ones(n), squared=squared, tol=0.1, seed=0)
    assert fit.status == "converged"
    codes = [c for _, _, c in log]
    assert codes.count(2) == len(checks) >= 2 and codes[-1] == 2 and 0 not in codes
    assert [v <= 0.1 for v, _, _ in checks] == [False] * (len(checks) - 1) + [True]
    first_shrunk = next(i for i, (_, end, _) in enumerate(log) if end < n)
    assert all(start < n for start, _, _ in log[first_shrunk + 1 :])
    assert fit.n_iter == len(log) + len(checks)
    G, PG = projected_gradient(X, y, fit.w, fit.dual, squared)
    assert PG.max() - PG.min() == pytest.approx(checks[-1][0], rel=1e-9, abs=1e-12)
    assert PG.max() - PG.min() <= 0.1
    # the objective from the last check's pass: the primal's at the returned w
    assert fit.objective == pytest.approx(svc_objective(fit.w, X, y, squared), rel=1e-12)
    # tight, against liblinear-official
    tight = dual_cd.solve_svc(ld, y, np.ones(n), squared=squared, tol=1e-3, seed=0, max_iter=5000)
    assert tight.status == "converged"
    seed_liblinear()
    model = liblinearutil.train(y, X, f"-s {1 if squared else 3} -c 1 -e 1e-7 -B 1 -q")
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0
    theirs = svc_objective(sign * np.r_[np.asarray(model.get_decfun()[0]), model.get_decfun()[1]], X, y, squared)
    ours = svc_objective(tight.w, X, y, squared)
    assert ours == pytest.approx(tight.objective, rel=1e-12)
    assert ours <= theirs * (1 + 1e-6), (ours, theirs)
    assert np.ptp(projected_gradient(X, y, tight.w, tight.dual, squared)[1]) <= 1e-3


@pytest.mark.parametrize("dense", [False, True], ids=["records", "arrays"])
def test_settled_rows_against_numpy(dense):
    """``settled_rows`` on a made-up state: the spread of the projected gradients and the rows kept, as NumPy
    computes them, on CSR records and on dense arrays."""
    rng = np.random.default_rng(3)
    X, y = rare_positives(n=500, d=6)
    n = y.shape[0]
    upper = np.ones(n)
    alpha = rng.choice([0.0, 1.0, 0.5], size=n, p=[0.6, 0.2, 0.2]) * upper
    w = rng.normal(size=7)
    diag = np.zeros(n)
    G = y * (X @ w[:-1] + w[-1]) - 1.0
    PG = np.where(alpha == 0.0, np.minimum(G, 0.0), np.where(alpha == upper, np.maximum(G, 0.0), G))
    pmax, pmin = 0.3, -0.2
    settled = ((alpha == 0.0) & (G > pmax)) | ((alpha == upper) & (G < pmin))
    index = np.full(n, -1, dtype=np.int64)
    if dense:
        ld = linear_data(X.toarray(), 1.0)
        args = (*ld.args(), dual_cd.NO_RECORDS, y, diag, upper, alpha, w, index, False)
    else:
        ld = linear_data(X, 1.0)
        R = dual_cd.row_records(y, alpha, np.ones(n), diag, upper, ld.indptr)
        args = (ld.args()[0], ld.data, ld.indices, ld.indptr, False, ld.n_features, 1.0, R, y, diag, upper, alpha)
        args += (w, index, ld.unit)
    C = rng.uniform(0.5, 2.0, size=n)
    for squared in (False, True):
        index[:] = -1
        viol, keep, loss = dual_cd.settled_rows(*args, pmax, pmin, C, squared, dual_cd.NO_RECORDS)
        xi = np.maximum(1.0 - y * (X @ w[:-1] + w[-1]), 0.0)  # the primal's loss at this w
        assert loss == pytest.approx(C @ (xi * xi if squared else xi), rel=1e-12)
        if not dense:  # folded rows: each row's folded features add alpha_i m_i to y_i w . x_i in the loss
            mass = rng.uniform(0.0, 2.0, size=n)
            index[:] = -1
            _, _, folded_loss = dual_cd.settled_rows(*args, pmax, pmin, C, squared, mass)
            xi = np.maximum(1.0 - y * (X @ w[:-1] + w[-1]) - alpha * mass, 0.0)
            assert folded_loss == pytest.approx(C @ (xi * xi if squared else xi), rel=1e-12)
    assert viol == pytest.approx(max(PG.max(), 0.0) - min(PG.min(), 0.0), rel=1e-12)
    assert keep == int((~settled).sum())
    assert sorted(index[:keep]) == list(np.flatnonzero(~settled))
    assert sorted(index[keep:]) == list(np.flatnonzero(settled))


def test_svr_epochs_drop_while_deciding(monkeypatch):
    X, _ = rare_positives()
    rng = np.random.default_rng(1)
    y = X @ rng.normal(size=X.shape[1]) + rng.normal(size=X.shape[0])
    n = y.shape[0]
    ld = linear_data(X, 1.0)
    log = record(monkeypatch, dual_cd, "_svr_epochs_rec", 12, 7)
    fit = dual_cd.solve_svr(ld, y, np.ones(n), 0.5, squared=False, tol=1e-4, seed=0)
    assert fit.status == "converged"
    check_epochs(log, n)
    seed_liblinear()
    model = liblinearutil.train(y, X, "-s 13 -c 1 -p 0.5 -e 1e-7 -B 1 -q")
    w = np.r_[np.asarray(model.get_decfun()[0]), model.get_decfun()[1]]

    def objective(w):
        return 0.5 * w @ w + np.maximum(0.0, np.abs(X @ w[:-1] + w[-1] - y) - 0.5).sum()

    assert objective(fit.w) == pytest.approx(fit.objective, rel=1e-12)
    assert objective(fit.w) <= objective(w) * (1 + 1e-7)  # (LIBLINEAR's stops at its 1,000 iterations, 1e-4 above)


def test_l1_columns_drop_while_deciding(monkeypatch):
    rng = np.random.default_rng(2)
    X = sp.random(600, 3000, density=0.01, random_state=1, format="csr")
    y = np.where(X @ np.r_[rng.normal(size=30), np.zeros(2970)] + 0.01 * rng.normal(size=600) > 0, 1.0, -1.0)
    log = record(monkeypatch, cd_l1, "_epochs", 11, 7)
    fit = cd_l1.solve(X, 1.0, y, np.ones(600), tol=1e-4, seed=0)
    assert fit.status == "converged"
    check_epochs(log, 3001)
    seed_liblinear()
    model = liblinearutil.train(y, X, "-s 5 -c 1 -e 1e-7 -B 1 -q")
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0
    w = sign * np.r_[np.asarray(model.get_decfun()[0]), model.get_decfun()[1]]

    def objective(w):
        xi = np.maximum(0.0, 1.0 - y * (X @ w[:-1] + w[-1]))
        return np.abs(w).sum() + xi @ xi

    assert objective(fit.w) == pytest.approx(fit.objective, rel=1e-12)
    assert objective(fit.w) <= objective(w) * (1 + 1e-7)  # (LIBLINEAR's stops at its 1,000 iterations: 1e-5 above)


def test_svc_check_within_max_iter():
    """The check counts as an iteration while the budget lasts: ``n_iter`` never passes ``max_iter``, and a fit that
    stopped short of it converged (every budget up to the unbounded fit's iterations)."""
    X, y = rare_positives(4000, 10)
    n = y.shape[0]
    ld = linear_data(X, 1.0)
    full = dual_cd.solve_svc(ld, y, np.ones(n), squared=False, tol=0.1, seed=0)
    assert full.status == "converged"
    for budget in range(1, full.n_iter + 2):
        fit = dual_cd.solve_svc(ld, y, np.ones(n), squared=False, tol=0.1, seed=0, max_iter=budget)
        assert fit.n_iter <= budget
        if fit.n_iter < budget or budget >= full.n_iter:
            assert fit.status == "converged", budget
        else:  # (the check after the budget's last epoch may still find every row settled)
            assert fit.status in ("converged", "max_iter"), budget


def _text_rows(n=3000, d=300, seed=5, unit=False):
    """Short sparse rows (8 words of ``d``, values up to 4.5) with a planted linear label: ~400 support vectors,
    so shrinking leaves a small share of the rows active."""
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, d, size=(n, 8))
    values = 3.0 * (np.ones(n * 8) if unit else rng.random(n * 8) + 0.5)
    X = sp.csr_matrix((values, cols.ravel(), np.arange(0, n * 8 + 1, 8)), shape=(n, d))
    X.sum_duplicates()
    return X, np.sign(X @ rng.standard_normal(d) + 1e-9)


@pytest.mark.parametrize("squared", [False, True], ids=["hinge", "squared"])
@pytest.mark.parametrize("unit", [False, True], ids=["values", "unit"])
def test_compact_rows_same_iterates(monkeypatch, squared, unit):
    """Epochs on a copy of the active rows (``dual_cd.CompactRows``, large data once shrinking leaves few rows) run
    the iterates of the epochs on every row, bit for bit: the same ``w``, multipliers, epochs and status, through
    unshrinks (the copy's epochs meeting ``tol`` report the active rows' case, so the check over every row
    follows) and at several ``tol``."""
    X, y = _text_rows(unit=unit)
    ld = linear_data(X, 1.0, rows_first=True)
    C = np.ones(y.shape[0])
    made = []
    real = dual_cd.CompactRows.__init__

    def counting(self, *args):
        made.append(args[-1])
        real(self, *args)

    monkeypatch.setattr(dual_cd.CompactRows, "__init__", counting)
    monkeypatch.setattr(dual_cd, "COMPACT_MIN_BYTES", 0)  # (small data: the copy made anyway)
    for tol, max_iter in ((0.1, 1000), (1e-4, 1000), (1e-4, 77)):
        made.clear()
        fit = dual_cd.solve_svc(ld, y, C, squared=squared, tol=tol, max_iter=max_iter, seed=3)
        if tol < 0.1:  # (at 0.1 the fit may end before shrinking leaves few rows)
            assert made and max(made) <= dual_cd.COMPACT_SHARE * y.shape[0]
        with monkeypatch.context() as m:
            m.setattr(dual_cd, "COMPACT_SHARE", -1.0)
            plain = dual_cd.solve_svc(ld, y, C, squared=squared, tol=tol, max_iter=max_iter, seed=3)
        assert (fit.n_iter, fit.status) == (plain.n_iter, plain.status)
        np.testing.assert_array_equal(fit.w, plain.w)
        np.testing.assert_array_equal(fit.dual, plain.dual)
        assert fit.objective == plain.objective
    # small data keep the plain epochs
    monkeypatch.undo()
    assert dual_cd.epoch_bytes(ld) < dual_cd.COMPACT_MIN_BYTES


@pytest.mark.parametrize("tol", [1e9, 1e-3], ids=["met-at-once", "epochs"])
def test_compact_rows_run_as_the_plain_epochs(tol):
    """``CompactRows.run`` on the first 100 of 3,000 rows against the plain record epochs on all of them with 100
    active: the same ``w``, multipliers, order of the rows and return code -- 2 (the active rows met ``tol``) where
    the copy's first epoch meets it, though the copy's epochs see every one of its rows active."""
    X, y = _text_rows()
    n = y.shape[0]
    ld = linear_data(X, 1.0, rows_first=True)
    QD = np.asarray(X.multiply(X).sum(axis=1)).ravel() + 1.0
    alpha0 = np.where(np.arange(n) % 3 == 0, 0.5, 0.0)
    w0 = np.asarray(X.T @ (alpha0 * y)).ravel()
    w0 = np.r_[w0, np.sum(alpha0 * y)]

    def state():
        R = dual_cd.row_records(y, alpha0, QD, np.zeros(n), np.ones(n), ld.indptr)
        index = np.random.default_rng(1).permutation(n).astype(np.int64)
        return R, w0.copy(), index, np.array([100, 0], dtype=np.int64), np.array([np.inf, -np.inf, np.inf])

    R, w, index, istate, fstate = state()
    plain_code = dual_cd._svc_epochs_rec(
        ld.data,
        ld.indices,
        ld.n_features,
        1.0,
        R,
        w,
        index,
        istate,
        fstate,
        _linear_common.rng_state(7),
        tol,
        6,
        True,
        ld.unit,
        2,
        1,
    )
    R2, w2, index2, istate2, fstate2 = state()
    alpha = R2[dual_cd.REC_ALPHA :: dual_cd.REC_WIDTH].copy()
    compact = dual_cd.CompactRows(ld, R2, ld.indices, index2, 100)
    code = compact.run(
        R2, w2, index2, istate2, fstate2, _linear_common.rng_state(7), tol, 6, True, ld.unit, ld.n_features, 1.0, alpha
    )
    assert plain_code == code == (2 if tol > 1 else 1)
    np.testing.assert_array_equal(w2, w)
    np.testing.assert_array_equal(index2, index)
    np.testing.assert_array_equal(istate2, istate)
    np.testing.assert_array_equal(R2, R)
    np.testing.assert_array_equal(alpha, R[dual_cd.REC_ALPHA :: dual_cd.REC_WIDTH])

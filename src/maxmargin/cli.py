r"""The ``maxmargin`` command: train, predict, evaluate and inspect SVMs from files.

For people who use LIBSVM's ``svm-train`` / ``svm-predict``: the same jobs,
with the same short options where they exist (``-c``, ``-g``, ``-d``, ``-r``,
``-e``, ``-m``, ``-w1 5``, ``-s``), data in CSV or LIBSVM format (plain, .gz,
.bz2, .xz), safe model files, readable errors and a progress display.

Exit codes: 0 success, 1 error (bad data, damaged model, failed fit), 2 usage
error (unknown option, bad value, missing file), 130 interrupted (Ctrl-C).
Errors are one or two lines on stderr; ``--debug`` shows the traceback.

Heavy modules (NumPy, scikit-learn, the solvers) are imported inside the
commands, so ``maxmargin --help`` is quick.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
import threading
import time
import warnings

import click

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_DEBUG = "maxmargin.debug"
_QUIET = "maxmargin.quiet"
_VERBOSE = "maxmargin.verbose"

#: --type -> (maxmargin class name, LIBSVM svm_type number)
TYPES = {
    "c-svc": ("SVC", 0),
    "nu-svc": ("NuSVC", 1),
    "one-class": ("OneClassSVM", 2),
    "epsilon-svr": ("SVR", 3),
    "nu-svr": ("NuSVR", 4),
}
_TYPE_ALIASES = {str(num): name for name, (_, num) in TYPES.items()}
_TYPE_ALIASES.update(
    {
        "svc": "c-svc",
        "svr": "epsilon-svr",
        "oneclass": "one-class",
        "one_class": "one-class",
        "c_svc": "c-svc",
        "nu_svc": "nu-svc",
        "epsilon_svr": "epsilon-svr",
        "nu_svr": "nu-svr",
    }
)
KERNELS = ("linear", "poly", "rbf", "sigmoid")
_KERNEL_ALIASES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid", "polynomial": "poly", "gaussian": "rbf"}


class CLIError(click.ClickException):
    """An error the user can act on: one line, optionally a hint line; exit 1."""

    exit_code = EXIT_ERROR

    def __init__(self, message, hint=None):
        super().__init__(message)
        self.hint = hint

    def show(self, file=None):
        file = file or sys.stderr
        click.echo(f"Error: {self.format_message()}", file=file)
        if self.hint:
            click.echo(f"  {self.hint}", file=file)


class Interrupted(Exception):
    """Raised when Ctrl-C stopped a fit; nothing has been written."""


def _describe(exc):
    """One readable line for an exception."""
    from .io.errors import DataFormatError, ModelFormatError

    if isinstance(exc, (DataFormatError, ModelFormatError)):
        return str(exc), None
    if isinstance(exc, OSError):
        if exc.filename is not None and exc.strerror:
            return f"{exc.filename}: {exc.strerror}", None
        return str(exc), None
    name = type(exc).__name__
    if name == "NotSeparableError":
        reason = str(exc).split(". Use ", 1)[0]
        return reason, "use --formulation l1 (soft margin) or l2, or a more flexible kernel (-k rbf)"
    if name == "QPTooLargeError":
        reason = str(exc).split(". Use ", 1)[0]
        return reason, (
            "use --solver smo or --solver batched, which never form the whole matrix "
            "(--solver frank-wolfe for --formulation l2-simplex)"
        )
    if isinstance(exc, MemoryError):
        return "out of memory", "use a smaller data set, a smaller --cache-size or a linear kernel"
    if isinstance(exc, (ValueError, NotImplementedError, TypeError)):
        text = str(exc).strip().splitlines()
        return (text[0] if text else type(exc).__name__), None
    return f"{type(exc).__name__}: {exc}", "this looks like a bug; run again with --debug to see where it happened"


class MaxmarginGroup(click.Group):
    """Turns exceptions into short messages and exit codes."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            raise  # the reader of our output went away (| head): click.main exits quietly
        except (KeyboardInterrupt, Interrupted) as exc:
            if ctx.meta.get(_DEBUG):
                raise
            if isinstance(exc, Interrupted):
                click.echo(f"Interrupted: {exc}", err=True)
            else:
                click.echo("\nInterrupted.", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if ctx.meta.get(_DEBUG) or os.environ.get("MAXMARGIN_DEBUG"):
                raise
            message, hint = _describe(exc)
            raise CLIError(message, hint) from None


class TrainCommand(click.Command):
    """Accepts LIBSVM's ``-wLABEL WEIGHT`` (``-w1 5``, ``-w-1 2``) besides ``-w LABEL=WEIGHT``."""

    def parse_args(self, ctx, args):
        out = []
        i = 0
        pattern = re.compile(r"^-w([+-]?\d+(?:\.\d*)?)$")
        while i < len(args):
            a = args[i]
            if a == "--":
                out.extend(args[i:])
                break
            m = pattern.match(a)
            if m and i + 1 < len(args):
                out.extend(["--class-weight", f"{m.group(1)}={args[i + 1]}"])
                i += 2
                continue
            out.append(a)
            i += 1
        return super().parse_args(ctx, out)


# --------------------------------------------------------------------------- option helpers


def _flag_callback(key, counting=False):
    def callback(ctx, param, value):
        if counting:
            if value:
                ctx.meta[key] = max(ctx.meta.get(key, 0), value)
        elif value:
            ctx.meta[key] = True
        return value

    return callback


def common_options(f):
    """--quiet, --verbose and --debug, accepted before or after the subcommand."""
    f = click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_flag_callback(_DEBUG),
        help="Show the full traceback when something fails.",
    )(f)
    f = click.option(
        "--verbose",
        count=True,
        expose_value=False,
        callback=_flag_callback(_VERBOSE, True),
        help="More detail: solver progress as log lines (twice: the solver's own output).",
    )(f)
    f = click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_flag_callback(_QUIET),
        help="Print only results, no progress or summaries.",
    )(f)
    return f


def data_options(f):
    """How to read data files."""
    f = click.option(
        "--label-column",
        default=None,
        metavar="COL",
        help="CSV: column of the label: number counting from 1, 'last', or a header name (default: the first).",
    )(f)
    f = click.option(
        "--header/--no-header", default=None, help="CSV: whether the first line is a header (default: guessed)."
    )(f)
    f = click.option(
        "--delimiter",
        default="auto",
        metavar="CHAR",
        help="CSV: field delimiter, e.g. ',' ';' tab whitespace (default: guessed).",
    )(f)
    f = click.option(
        "-f",
        "--format",
        "data_format",
        type=click.Choice(["auto", "csv", "libsvm", "svmlight"]),
        default="auto",
        show_default=True,
        help="Data file format (auto: decided from the content).",
    )(f)
    return f


def _data_kwargs(data_format, delimiter, header, label_column):
    if label_column is None:
        col = 0
    elif label_column.strip().lstrip("-").isdigit():
        n = int(label_column)
        if n == 0:
            raise click.BadParameter("columns count from 1", param_hint="--label-column")
        col = n - 1 if n > 0 else n
    else:
        col = label_column
    return {
        "format": data_format,
        "delimiter": delimiter,
        "header": "auto" if header is None else header,
        "label_column": col,
    }


class DataPath(click.Path):
    """A data file argument: a path, or a bundled data set (``builtin:heart_scale``, or ``heart_scale``
    when no such file exists here; ``maxmargin datasets`` lists them)."""

    def __init__(self, **kwargs):
        super().__init__(exists=True, dir_okay=False, **kwargs)

    def convert(self, value, param, ctx):
        from .datasets import resolve_data_path

        if isinstance(value, str) and value != "-":
            try:
                value = resolve_data_path(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)


class GammaType(click.ParamType):
    name = "GAMMA"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        v = str(value).strip().lower()
        if v in ("scale", "auto", "median"):
            return v
        try:
            g = float(v)
        except ValueError:
            self.fail(f"{value!r} is not a number, 'scale', 'auto' or 'median'", param, ctx)
        if not (g >= 0 and math.isfinite(g)):
            self.fail(f"{value!r} must be a non-negative number", param, ctx)
        return g


class ClassWeightType(click.ParamType):
    name = "LABEL=WEIGHT"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        v = str(value).strip()
        if v.lower() == "balanced":
            return ("balanced", None)
        label, sep, weight = v.partition("=")
        if not sep:
            self.fail(f"{value!r}: write LABEL=WEIGHT (e.g. 1=5), 'balanced', or LIBSVM's -w1 5", param, ctx)
        try:
            w = float(weight)
        except ValueError:
            self.fail(f"{value!r}: weight {weight!r} is not a number", param, ctx)
        if not (w >= 0 and math.isfinite(w)):
            self.fail(f"{value!r}: a weight must be a non-negative number", param, ctx)
        return (_parse_label(label.strip()), w)


def _parse_label(text):
    try:
        f = float(text)
    except ValueError:
        return text
    return int(f) if f.is_integer() else f


def _choice_alias(value, canonical, aliases, what):
    v = str(value).strip().lower()
    v = aliases.get(v, v)
    if v not in canonical:
        raise click.BadParameter(f"{value!r} is not one of {', '.join(canonical)}", param_hint=what)
    return v


def _fmt_label(c):
    try:
        f = float(c)
    except (TypeError, ValueError):
        return str(c)
    if f.is_integer():
        return str(int(f))
    return format(f, "g")


def _fmt(x, digits=4):
    if x is None:
        return "-"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f):
        return "unknown"
    if math.isinf(f):
        return "inf"
    if f.is_integer() and abs(f) < 1e12:
        return str(int(f))
    if abs(f) >= 1e5 or abs(f) < 1e-3:
        return format(f, f".{digits - 1}e")
    return format(f, f".{digits}g")


def _fmt_params(params):
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _echo(ctx, text="", err=False):
    if not ctx.meta.get(_QUIET):
        click.echo(text, err=err)


def _stderr_is_tty():
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# --------------------------------------------------------------------------- progress and Ctrl-C


class Progress:
    """A fit's watcher (:func:`maxmargin.callbacks.watching`, the mechanism behind
    ``set_callbacks`` and ``callback=``): draws a progress line and carries Ctrl-C to the solver.

    ``mode`` is ``'tty'`` (one line redrawn in place, at most 10 times a
    second), ``'log'`` (a line per solver chunk, for ``--verbose``) or
    ``None`` (silent).  After ``stop()``, the next call returns False, which
    makes the solver stop at once.
    """

    def __init__(self, mode, stream=None, prefix="", width=None):
        self.mode = mode
        self.width = width
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix
        self.stopped = False
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._drawn = False
        self._first_violation = {}
        self.calls = 0

    def stop(self):
        self.stopped = True

    def starting(self):
        """A first line on a terminal, until the solver reports (after its first chunk of iterations)."""
        self.stream.write("\r" + (self.prefix + "  " if self.prefix else "") + "training: starting the solver...\x1b[K")
        self.stream.flush()
        self._drawn = True

    def __call__(self, info):
        self.calls += 1
        if self.stopped:
            return False
        if self.mode is None:
            return None
        now = time.perf_counter()
        if self.mode == "tty" and now - self._last < 0.1:
            return None
        self._last = now
        if self.mode == "tty":
            width = self.width or _terminal_width()
            line = self.format(info, now - self.t0)
            if len(line) >= width:
                line = self.format(info, now - self.t0, objective=False)
            self.stream.write("\r" + line[: width - 1] + "\x1b[K")
            self._drawn = True
        else:
            self.stream.write(self.format(info, now - self.t0) + "\n")
        self.stream.flush()
        return None

    def format(self, info, elapsed, objective=True):
        if "done" in info:  # a sub-problem finished (also those solved in compiled batches)
            parts = [self.prefix] if self.prefix else []
            done, total = int(info["done"]), int(info.get("n_subproblems") or 0)
            if total > 1:
                filled = int(10 * done / total)
                parts.append(f"problems {done}/{total} [" + "#" * filled + "." * (10 - filled) + "]")
                if 0 < done < total:
                    parts.append(f"about {elapsed / done * (total - done):.0f} s left")
            parts.append(f"{elapsed:.1f} s")
            return "  ".join(parts)
        viol = float(info.get("violation", float("nan")))
        tol = float(info.get("tol", float("nan")))
        sub, nsub = info.get("subproblem"), info.get("n_subproblems")
        parts = [self.prefix] if self.prefix else []
        if nsub and nsub > 1:
            parts.append(f"problem {int(sub) + 1}/{int(nsub)}")
        key = sub if sub is not None else 0
        first = self._first_violation.setdefault(key, viol)
        bar = ""
        if math.isfinite(viol) and math.isfinite(tol) and first > tol > 0 and viol > 0:
            frac = min(max(math.log(first / viol) / math.log(first / tol), 0.0), 1.0)
            filled = int(round(frac * 10))
            bar = "[" + "#" * filled + "." * (10 - filled) + "]"
        if bar:
            parts.append(bar)
        parts.append(f"iter {int(info.get('iteration', 0)):,}")
        parts.append(f"KKT violation {viol:.2e} (tol {tol:.0e})")
        obj = info.get("objective")
        if obj is not None and objective:
            parts.append(f"objective {float(obj):.6g}")
        parts.append(f"{elapsed:.1f} s")
        return "  ".join(parts)

    def close(self):
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def _terminal_width():
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns if columns >= 40 else 100


class InterruptGuard:
    """While active, the first Ctrl-C asks the solver to stop (via ``progress``); the second aborts."""

    def __init__(self, progress):
        self.progress = progress
        self.interrupted = False
        self._old = None

    def _handler(self, signum, frame):
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        self.progress.stop()
        self.progress.close()
        try:
            sys.stderr.write("\nStopping... (press Ctrl-C again to abort at once)\n")
            sys.stderr.flush()
        except Exception:  # pragma: no cover - stderr closed
            pass

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


def _progress_mode(ctx):
    if ctx.meta.get(_QUIET):
        return None
    if ctx.meta.get(_VERBOSE):
        return "log"
    return "tty" if _stderr_is_tty() else None


def _fit(ctx, estimator, X, y, prefix=""):
    """Fit with progress display, Ctrl-C handling and warnings as one-line messages."""
    from sklearn.exceptions import ConvergenceWarning

    from .callbacks import watching

    progress = Progress(_progress_mode(ctx), prefix=prefix)
    guard = InterruptGuard(progress)
    if progress.mode == "tty":
        progress.starting()
    t0 = time.perf_counter()
    try:
        with guard, watching(progress), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                estimator.fit(X, y)
            except Exception:
                if guard.interrupted:
                    raise Interrupted("training stopped; nothing was written") from None
                raise
    except KeyboardInterrupt:
        raise Interrupted("training stopped; nothing was written") from None
    finally:
        progress.close()
    if guard.interrupted:
        raise Interrupted("training stopped; nothing was written")
    seconds = time.perf_counter() - t0
    seen = set()
    for w in caught:
        # the solver's and the estimators' own warnings; library deprecations only with --verbose
        if issubclass(w.category, (ConvergenceWarning, UserWarning, RuntimeWarning)) or ctx.meta.get(_VERBOSE):
            msg = str(w.message)
            if msg not in seen:
                seen.add(msg)
                _echo(ctx, f"Warning: {msg}", err=True)
    return seconds


# --------------------------------------------------------------------------- model description


def _final(model):
    return model.steps[-1][1] if hasattr(model, "steps") else model


def _kind(est):
    """'classifier', 'regressor', 'outlier_detector' or None (scikit-learn's estimator type)."""
    try:
        t = est.__sklearn_tags__().estimator_type
    except Exception:  # pragma: no cover - estimators without tags
        t = getattr(est, "_estimator_type", None)
    if t is None:
        try:
            from sklearn.base import is_classifier, is_regressor

            t = "classifier" if is_classifier(est) else "regressor" if is_regressor(est) else None
        except Exception:  # pragma: no cover
            t = None
    if t is None and type(est).__name__ == "OneClassSVM":
        t = "outlier_detector"
    return t


def _type_name(est):
    name = type(est).__name__
    for t, (cls, _) in TYPES.items():
        if cls == name:
            return t
    return name


def _as_float_array(v):
    import numpy as np

    if v is None:
        return None
    return np.atleast_1d(np.asarray(v, dtype=float))


def _summary_numbers(est):
    """margin, LOO bound, objective, n_iter as displayable values."""
    import numpy as np

    margin = _as_float_array(getattr(est, "margin_", None))
    w_norm = _as_float_array(getattr(est, "w_norm_", None))
    objective = _as_float_array(getattr(est, "objective_", None))
    n_iter = getattr(est, "n_iter_", None)

    def one(a):
        if a is None or a.size == 0:
            return None
        if a.size == 1:
            return float(a[0])
        return a

    return {
        "margin": one(margin),
        # NaN (not stored, e.g. LIBSVM model files) stays NaN; ||w|| = 0 gives an infinite half-width
        "half_width": None
        if w_norm is None
        else one(
            np.where(np.isnan(w_norm), np.nan, np.where(w_norm > 0, 1.0 / np.where(w_norm > 0, w_norm, 1), np.inf))
        ),
        "loo_bound": getattr(est, "loo_bound_", None),
        "objective": one(objective),
        "n_iter": None if n_iter is None else int(np.sum(n_iter)),
    }


def _margin_meaning(est):
    """What ``margin_`` holds: 1/||w|| for the linear estimators (LinearSVC/LinearSVR, intercept excluded), the
    smallest functional margin over ||w|| for the kernel ones."""
    from .linear import _LinearSVMBase

    if isinstance(est, _LinearSVMBase):
        return "1 / ||w||, intercept excluded"
    return "min y f(x) / ||w||"


def _problems_unit(est):
    """What the per-problem values (margin, objective) of a multi-class model are counted over."""
    from .linear import _LinearSVMBase

    if isinstance(est, _LinearSVMBase):
        return (
            "crammer-singer classes"
            if getattr(est, "multi_class", "ovr") == "crammer_singer"
            else "classes (one-vs-rest)"
        )
    return "class pairs"


def _fmt_multi(v, unit="class pairs"):
    import numpy as np

    if v is None:
        return "-"
    if isinstance(v, np.ndarray):
        if np.all(np.isnan(v)):
            return "unknown"
        return f"{_fmt(np.nanmin(v))} .. {_fmt(np.nanmax(v))} over {v.size} {unit}"
    return _fmt(v)


def _sv_text(est):
    import numpy as np

    n_sv = getattr(est, "support_", None)
    if n_sv is None:
        return "-"
    total = int(np.asarray(n_sv).shape[0])
    ns = getattr(est, "n_support_", None)
    classes = getattr(est, "classes_", None)
    if ns is not None and classes is not None and len(ns) == len(classes):
        per = ", ".join(f"{int(k)} of class {_fmt_label(c)}" for c, k in zip(classes, ns))
        return f"{total} ({per})"
    return str(total)


def _kernel_text(est, sigma=False):
    k = getattr(est, "kernel", "?")
    g = getattr(est, "_gamma", None)
    parts = [str(k)]
    if k in ("rbf", "poly", "sigmoid") and g is not None:
        gamma = f"gamma {_fmt(g)}"
        if sigma and k == "rbf" and g > 0:
            gamma += f" (sigma {_fmt(1.0 / math.sqrt(2.0 * g))})"
        parts.append(gamma)
    if k == "poly":
        parts.append(f"degree {getattr(est, 'degree', '?')}")
    if k in ("poly", "sigmoid"):
        parts.append(f"coef0 {_fmt(getattr(est, 'coef0', 0.0))}")
    return ", ".join(parts)


def _training_report(ctx, model, fit_seconds, ds):
    est = _final(model)
    nums = _summary_numbers(est)
    kind = _kind(est)
    status = getattr(est, "fit_status_", 0)
    _echo(
        ctx,
        f"Trained {type(est).__name__} (kernel {_kernel_text(est)}, C {_fmt(getattr(est, 'C', None))}) on "
        f"{ds.n_samples:,} samples with {ds.n_features:,} features in {fit_seconds:.2f} s"
        + ("" if status == 0 else "  [stopped before convergence]"),
    )
    _echo(ctx, f"  support vectors   {_sv_text(est)}")
    if nums["margin"] is not None:
        _echo(ctx, f"  margin            {_fmt_multi(nums['margin'], _problems_unit(est))}   ({_margin_meaning(est)})")
    if nums["half_width"] is not None:
        _echo(ctx, f"  1/||w||           {_fmt_multi(nums['half_width'])}   (half-width of the band |f| < 1)")
    if nums["loo_bound"] is not None:
        _echo(ctx, f"  LOO bound         {_fmt(nums['loo_bound'])}")
    if nums["objective"] is not None:
        _echo(ctx, f"  objective         {_fmt_multi(nums['objective'], _problems_unit(est))}")
    if nums["n_iter"] is not None:
        _echo(ctx, f"  iterations        {nums['n_iter']:,}")
    err = getattr(est, "train_error_", None)
    if kind == "classifier" and err is not None and not math.isnan(err):
        _echo(ctx, f"  training accuracy {100 * (1 - err):.2f}%")


# --------------------------------------------------------------------------- loading helpers


def _read_training_data(path, kwargs):
    from .io.data import read_data

    ds = read_data(path, **kwargs)
    if ds.y is None:  # pragma: no cover - read_data with labels=True always has y
        raise CLIError(f"{ds.path}: no label column")
    return ds


def _model_n_features(model):
    for step in [s for _, s in model.steps] if hasattr(model, "steps") else [model]:
        n = getattr(step, "n_features_in_", None)
        if n is not None:
            return int(n)
    return None


def _load_model_and_data(model_path, data_path, data_kwargs, labels):
    """Load a model (maxmargin or LIBSVM file) and data aligned with it."""
    import numpy as np
    import scipy.sparse as sp

    from .io import load_any_model, read_data
    from .io.libsvm_model import widen_features

    model, kind = load_any_model(model_path)
    if kind == "libsvm":
        ds = read_data(data_path, labels=True if labels is None else labels, **data_kwargs)
        est = model
        have = est.n_features_in_
        if ds.n_features > have:
            widen_features(est, ds.n_features)
        elif ds.n_features < have:
            if sp.issparse(ds.X):
                ds.X = sp.csr_matrix((ds.X.data, ds.X.indices, ds.X.indptr), shape=(ds.n_samples, have))
            else:
                ds.X = np.hstack([ds.X, np.zeros((ds.n_samples, have - ds.n_features))])
    else:
        nf = _model_n_features(model)
        ds = read_data(data_path, labels="auto" if labels is None else labels, n_features=nf, **data_kwargs)
        # scalers that centre need dense input
        if (
            sp.issparse(ds.X)
            and hasattr(model, "steps")
            and any(getattr(s, "with_mean", False) for _, s in model.steps[:-1])
        ):
            ds.X = ds.X.toarray()
    return model, kind, ds


# --------------------------------------------------------------------------- the group


def _print_version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    try:
        from importlib.metadata import version

        v = version("maxmargin")
    except Exception:
        import maxmargin

        v = getattr(maxmargin, "__version__", "unknown")
    click.echo(f"maxmargin {v}")
    ctx.exit()


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=MaxmarginGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@common_options
def cli():
    """Support vector machines from the command line.

    \b
    First steps:
      maxmargin quickstart                      train on a bundled data set and explain the numbers
      maxmargin train data.csv -o model.mm      train (CSV with the label first, or LIBSVM format)
      maxmargin predict model.mm test.csv       predict; prints the accuracy if test.csv has labels
      maxmargin evaluate model.mm test.csv      accuracy, confusion matrix, precision and recall
      maxmargin info model.mm                   what is inside a model file
      maxmargin datasets                        the bundled data sets (e.g. train heart_scale --cv 5)

    Data files: CSV (label in the first column, optional header) or LIBSVM/svmlight
    (`label index:value ...`), optionally .gz/.bz2/.xz compressed. Model files:
    maxmargin's own format, or LIBSVM model files (read, and written with --model-format libsvm).
    """


# --------------------------------------------------------------------------- train


def _resolve_class(type_name):
    import maxmargin

    cls_name = TYPES[type_name][0]
    cls = getattr(maxmargin, cls_name, None)
    if cls is None:
        available = [t for t, (c, _) in TYPES.items() if getattr(maxmargin, c, None) is not None]
        raise click.BadParameter(
            f"{type_name} needs maxmargin.{cls_name}, which this version does not have yet "
            f"(available: {', '.join(available)})",
            param_hint="--type",
        )
    return cls


def _refuse_overwrite(output, inputs, param_hint="-o/--output"):
    """A usage error when ``output`` names the same file as one of ``inputs`` (after resolving
    relative paths and symbolic links): writing it would destroy that input."""
    if output is None or output == "-":
        return
    out = os.path.realpath(output)
    for what, path in inputs:
        if path is None or path == "-":
            continue
        same = os.path.realpath(path) == out
        if not same and os.path.exists(output) and os.path.exists(path):
            try:
                same = os.path.samefile(output, path)
            except OSError:  # pragma: no cover - raced away
                same = False
        if same:
            raise click.BadParameter(
                f"{output} is the {what}; writing there would overwrite it: choose another output file",
                param_hint=param_hint,
            )


def _linear_class(type_name):
    """--linear: LinearSVC for c-svc, LinearSVR for epsilon-svr."""
    import maxmargin

    by_type = {"c-svc": maxmargin.LinearSVC, "epsilon-svr": maxmargin.LinearSVR}
    if type_name not in by_type:
        raise click.BadParameter(f"--linear trains c-svc or epsilon-svr, not {type_name}", param_hint="--type")
    return by_type[type_name]


def _default_model_path(data_path):
    name = os.path.basename(os.fspath(data_path))
    for suffix in (".gz", ".bz2", ".xz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name + ".model"


@cli.command(cls=TrainCommand, context_settings=CONTEXT_SETTINGS)
@click.argument("data", type=DataPath(allow_dash=True))
@click.option(
    "-o",
    "--output",
    "model_path",
    type=click.Path(dir_okay=False),
    help="Model file to write (default: DATA's name + .model in the current directory).",
)
@click.option(
    "-s",
    "--type",
    "svm_type",
    default="c-svc",
    show_default=True,
    metavar="TYPE",
    help="c-svc, nu-svc, one-class, epsilon-svr, nu-svr (or LIBSVM's 0-4).",
)
@click.option(
    "-k",
    "-t",
    "--kernel",
    default="rbf",
    show_default=True,
    metavar="KERNEL",
    help="linear, poly, rbf, sigmoid (or LIBSVM's 0-3).",
)
@click.option("-c", "--C", "C", type=float, default=1.0, show_default=True, help="Penalty of the slack.")
@click.option(
    "-g",
    "--gamma",
    type=GammaType(),
    default="scale",
    show_default=True,
    help="Kernel coefficient: a number, scale, auto or median.",
)
@click.option("--sigma", type=float, default=None, help="Gaussian width; sets gamma = 1/(2 sigma^2).")
@click.option("-d", "--degree", type=int, default=3, show_default=True, help="Degree of the poly kernel.")
@click.option("-r", "--coef0", type=float, default=0.0, show_default=True, help="coef0 of poly/sigmoid.")
@click.option("-n", "--nu", type=float, default=None, help="nu of nu-svc, one-class and nu-svr.")
@click.option("-p", "--epsilon", type=float, default=None, help="epsilon of epsilon-svr.")
@click.option("--formulation", default=None, help="Which SVM, e.g. l1 (hinge, default), hard, l2.")
@click.option("--solver", default=None, help="Which algorithm, e.g. smo (default).")
@click.option("-e", "--tol", type=float, default=1e-3, show_default=True, help="Stopping tolerance (KKT violation).")
@click.option("-m", "--cache-size", type=float, default=200.0, show_default=True, help="Kernel cache in MB.")
@click.option(
    "-w",
    "--class-weight",
    "class_weight",
    type=ClassWeightType(),
    multiple=True,
    help="Weight of a class, LABEL=WEIGHT (repeatable; LIBSVM's -w1 5 works too), or 'balanced'.",
)
@click.option("--probability", is_flag=True, help="Fit probability estimates.")
@click.option("--shrinking/--no-shrinking", default=True, show_default=True, help="Shrinking heuristic.")
@click.option("--max-iter", type=int, default=-1, show_default=True, help="Iteration limit per problem (-1: none).")
@click.option("--time-limit", type=float, default=None, metavar="SECONDS", help="Time limit per problem.")
@click.option(
    "--cv",
    type=click.IntRange(min=2),
    default=None,
    metavar="K",
    help="K-fold cross-validation instead of training a model (like svm-train -v K).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the cross-validation folds.")
@click.option(
    "--scale/--no-scale",
    default=False,
    show_default=True,
    help="Standardise features; the scaler is stored in the model and applied by predict.",
)
@click.option(
    "--model-format",
    type=click.Choice(["maxmargin", "libsvm", "liblinear"]),
    default="maxmargin",
    show_default=True,
    help="Write maxmargin's model file, a LIBSVM or (with --linear) a LIBLINEAR one.",
)
@click.option(
    "--linear", is_flag=True, help="LinearSVC / LinearSVR (LIBLINEAR's models and solvers; -s c-svc or epsilon-svr)."
)
@data_options
@common_options
@click.pass_context
def train(
    ctx,
    data,
    model_path,
    svm_type,
    kernel,
    C,
    gamma,
    sigma,
    degree,
    coef0,
    nu,
    epsilon,
    formulation,
    solver,
    tol,
    cache_size,
    class_weight,
    probability,
    shrinking,
    max_iter,
    time_limit,
    cv,
    seed,
    scale,
    model_format,
    linear,
    data_format,
    delimiter,
    header,
    label_column,
):
    """Train an SVM on DATA and write a model file (or cross-validate with --cv K).

    \b
    Examples:
      maxmargin train heart_scale -c 10 -g 0.1 -o heart.model
      maxmargin train data.csv --kernel linear --scale -o model.mm
      maxmargin train a9a.xz --cv 5
      maxmargin train data.csv -w1 5 -w-1 1            (class weights, LIBSVM style)
      maxmargin train a9a.xz --linear -c 1 --model-format liblinear -o a9a.model
    """
    svm_type = _choice_alias(svm_type, tuple(TYPES), _TYPE_ALIASES, "--type")
    kernel = _choice_alias(kernel, KERNELS, _KERNEL_ALIASES, "--kernel")
    if cv is not None and model_path is not None:
        raise click.UsageError("--cv evaluates by cross-validation and writes no model; drop -o/--output")
    if cv is None:
        if model_path is None:
            if data == "-":
                raise click.UsageError("give -o/--output when the data come from standard input")
            model_path = _default_model_path(data)
        _refuse_overwrite(model_path, [("training data file DATA", data)])
        directory = os.path.dirname(os.path.abspath(model_path))
        if not os.path.isdir(directory):
            raise click.BadParameter(f"directory {directory} does not exist", param_hint="-o/--output")
        if os.path.isdir(model_path):
            raise click.BadParameter(f"{model_path} is a directory", param_hint="-o/--output")
        if model_format in ("libsvm", "liblinear") and scale:
            raise click.UsageError(
                f"a {model_format.upper()} model file cannot hold the --scale scaler; "
                "use --model-format maxmargin or drop --scale"
            )

    cls = _resolve_class(svm_type) if not linear else _linear_class(svm_type)
    if model_format == "liblinear" and not linear:
        raise click.UsageError("--model-format liblinear needs --linear")
    if linear and model_format == "libsvm":
        raise click.UsageError("a linear model is written as --model-format liblinear (or maxmargin), not libsvm")
    if linear and max_iter == -1:
        max_iter = 1000  # LIBLINEAR's default number of outer iterations
    valid = cls().get_params()
    source = ctx.get_parameter_source
    given = {
        "C": C,
        "kernel": kernel,
        "gamma": gamma,
        "degree": degree,
        "coef0": coef0,
        "tol": tol,
        "cache_size": cache_size,
        "shrinking": shrinking,
        "max_iter": max_iter,
    }
    optional = {
        "sigma": sigma,
        "nu": nu,
        "epsilon": epsilon,
        "formulation": formulation,
        "solver": solver,
        "time_limit": time_limit,
    }
    params = {}
    for name, value in given.items():
        if name in valid:
            params[name] = value
        elif source(name) is not None and source(name).name == "COMMANDLINE":
            raise click.BadParameter(f"does not apply to --type {svm_type}", param_hint=f"--{name.replace('_', '-')}")
    for name, value in optional.items():
        if value is None:
            continue
        if name not in valid:
            raise click.BadParameter(f"does not apply to --type {svm_type}", param_hint=f"--{name.replace('_', '-')}")
        params[name] = value
    if probability:
        if "probability" not in valid:
            raise click.BadParameter(f"does not apply to --type {svm_type}", param_hint="--probability")
        params["probability"] = True

    ds = _read_training_data(data, _data_kwargs(data_format, delimiter, header, label_column))

    if class_weight:
        if "class_weight" not in valid:
            raise click.BadParameter(f"does not apply to --type {svm_type}", param_hint="-w/--class-weight")
        if any(k == "balanced" for k, _ in class_weight):
            if len(class_weight) > 1:
                raise click.BadParameter(
                    "'balanced' cannot be combined with per-label weights", param_hint="-w/--class-weight"
                )
            params["class_weight"] = "balanced"
        else:
            import numpy as np

            labels = set(np.unique(ds.y).tolist())
            cw = {}
            for label, weight in class_weight:
                if label not in labels:
                    raise click.BadParameter(
                        f"label {_fmt_label(label)} is not in the training data (labels: "
                        f"{', '.join(_fmt_label(v) for v in sorted(labels))})",
                        param_hint="-w/--class-weight",
                    )
                cw[label] = weight
            params["class_weight"] = cw

    if ctx.meta.get(_VERBOSE, 0) >= 2 and "verbose" in valid:
        params["verbose"] = True
    try:
        estimator = cls(**params)
    except TypeError as exc:  # pragma: no cover - params are filtered above
        raise CLIError(str(exc)) from None
    model = estimator
    if scale:
        import scipy.sparse as sp
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        centre = not sp.issparse(ds.X)
        if not centre and ds.n_features <= 10_000:
            ds.X = ds.X.toarray()
            centre = True
        model = Pipeline([("scaler", StandardScaler(with_mean=centre)), ("svm", estimator)])

    name = ds.path if ds.path == "<stdin>" else os.path.basename(ds.path)
    _echo(ctx, f"Read {name}: {_data_summary(ds)}")
    if cv is not None:
        _cross_validate(ctx, model, ds, cv, seed, name)
        return

    fit_seconds = _fit(ctx, model, ds.X, ds.y)
    _training_report(ctx, model, fit_seconds, ds)
    if model_format == "libsvm":
        from .io import save_libsvm_model

        save_libsvm_model(_final(model), model_path)
    elif model_format == "liblinear":
        from .io import save_liblinear_model

        save_liblinear_model(_final(model), model_path)
    else:
        from .io import save_model

        info = {
            "train_file": name,
            "train_format": ds.format,
            "n_samples": int(ds.n_samples),
            "n_features": int(ds.n_features),
            "fit_time": float(fit_seconds),
            "svm_type": svm_type,
        }
        save_model(model, model_path, info=info)
    _echo(ctx, f"Model written to {model_path}")


def _data_summary(ds):
    import numpy as np

    how = ds.format.upper() if ds.format == "csv" else "LIBSVM format"
    if ds.compression:
        how += f", {ds.compression}-compressed"
    labels = np.unique(ds.y)
    lab = (
        f"{len(labels)} labels ({', '.join(_fmt_label(v) for v in labels)})"
        if len(labels) <= 10
        else f"{len(labels)} distinct labels"
    )
    return f"{ds.n_samples:,} samples, {ds.n_features:,} features, {lab} [{how}]"


def _cross_validate(ctx, model, ds, k, seed, name):
    import numpy as np
    from sklearn.base import clone
    from sklearn.model_selection import KFold, StratifiedKFold

    est = _final(model)
    kind = _kind(est)
    if kind not in ("classifier", "regressor"):
        raise click.UsageError(f"--cv needs a classifier or a regressor, not {type(est).__name__}")
    n = ds.n_samples
    if kind == "classifier":
        _, counts = np.unique(ds.y, return_counts=True)
        if counts.min() < k:
            raise CLIError(
                f"--cv {k}: the smallest class has only {counts.min()} samples; use at most {counts.min()} folds"
            )
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        how = "stratified"
    else:
        if n < k:
            raise CLIError(f"--cv {k}: only {n} samples")
        splitter = KFold(n_splits=k, shuffle=True, random_state=seed)
        how = "shuffled"
    params = est.get_params()
    shown = [
        f"{key}={params[key]!r}"
        for key in ("kernel", "C", "nu", "epsilon", "gamma", "sigma", "degree", "coef0")
        if key in params
        and params[key] is not None
        and not (key in ("gamma", "sigma", "degree", "coef0") and params.get("kernel") == "linear")
        and not (key in ("degree", "coef0") and params.get("kernel") == "rbf")
    ]
    _echo(
        ctx,
        f"{k}-fold cross-validation ({how}, seed {seed}) of {type(est).__name__}({', '.join(shown)}) "
        f"on {name}: {n:,} samples",
    )
    pred = np.empty(n, dtype=float)
    fold_scores = []
    total_t = 0.0
    for fold, (tr, te) in enumerate(splitter.split(np.zeros((n, 1)), ds.y), 1):
        m = clone(model)
        total_t += _fit(ctx, m, ds.X[tr], ds.y[tr], prefix=f"fold {fold}/{k}")
        p = m.predict(ds.X[te])
        pred[te] = p
        if kind == "classifier":
            score = float(np.mean(p == ds.y[te]))
            fold_scores.append(score)
            _echo(ctx, f"  fold {fold}: accuracy {100 * score:.2f}% ({len(te)} samples)")
        else:
            score = float(np.mean((p - ds.y[te]) ** 2))
            fold_scores.append(score)
            _echo(ctx, f"  fold {fold}: mean squared error {score:.6g} ({len(te)} samples)")
    scores = np.array(fold_scores)
    if kind == "classifier":
        correct = int(np.sum(pred == ds.y))
        click.echo(f"Cross Validation Accuracy = {100 * correct / n:.4f}% ({correct}/{n})")
        click.echo(f"Mean fold accuracy = {100 * scores.mean():.4f}% (std {100 * scores.std():.2f}%)")
    else:
        mse = float(np.mean((pred - ds.y) ** 2))
        r2 = _squared_correlation(pred, ds.y)
        click.echo(f"Cross Validation Mean squared error = {mse:.6g}")
        click.echo(f"Cross Validation Squared correlation coefficient = {r2:.6g}")
    _echo(ctx, f"({k} fits in {total_t:.2f} s)")


def _squared_correlation(p, y):
    import numpy as np

    if np.std(p) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(p, y)[0, 1] ** 2)


# --------------------------------------------------------------------------- predict


def _labels_flag(value):
    return {"auto": None, "yes": True, "no": False}[value]


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", type=DataPath(allow_dash=True))
@click.option(
    "-o",
    "--output",
    "out_path",
    type=click.Path(dir_okay=False),
    help="Write the predictions here (default: standard output).",
)
@click.option("--proba", is_flag=True, help="Also write class probabilities (LIBSVM's -b 1 layout).")
@click.option("--decision", is_flag=True, help="Also write decision values.")
@click.option(
    "--labels",
    "has_labels",
    type=click.Choice(["auto", "yes", "no"]),
    default="auto",
    show_default=True,
    help="CSV: whether DATA has a label column (auto: from the column count).",
)
@data_options
@common_options
@click.pass_context
def predict(ctx, model_path, data, out_path, proba, decision, has_labels, data_format, delimiter, header, label_column):
    """Predict DATA with MODEL (a maxmargin or LIBSVM model file).

    Writes one prediction per line (to -o OUT or standard output). With --proba
    the first line is `labels c1 c2 ...` and each line the prediction and the
    class probabilities; with --decision the prediction and the decision values.
    When DATA has labels, the accuracy (or the mean squared error) is printed
    (to standard error when the predictions go to standard output).
    """
    import numpy as np

    if proba and decision:
        raise click.UsageError("choose one of --proba and --decision")
    if out_path is not None:
        directory = os.path.dirname(os.path.abspath(out_path))
        if not os.path.isdir(directory):
            raise click.BadParameter(f"directory {directory} does not exist", param_hint="-o/--output")
        _refuse_overwrite(out_path, [("model file MODEL", model_path), ("data file DATA", data)])
    kwargs = _data_kwargs(data_format, delimiter, header, label_column)
    model, kind, ds = _load_model_and_data(model_path, data, kwargs, _labels_flag(has_labels))
    est = _final(model)
    pred = model.predict(ds.X)
    extra = None
    header_line = None
    if proba:
        if not hasattr(model, "predict_proba"):
            raise CLIError("this model gives no probabilities", "train it with --probability")
        extra = np.atleast_2d(model.predict_proba(ds.X))
        header_line = "labels " + " ".join(_fmt_label(c) for c in est.classes_)
    elif decision:
        extra = np.asarray(model.decision_function(ds.X))
        if extra.ndim == 1:
            extra = extra[:, None]
            classes = getattr(est, "classes_", None)
            header_line = "label decision" + (
                f"(positive={_fmt_label(classes[1])})" if classes is not None and len(classes) == 2 else ""
            )
        else:
            header_line = "label " + " ".join(_fmt_label(c) for c in est.classes_)
    lines = []
    if header_line:
        lines.append(header_line)
    if extra is None:
        lines.extend(_fmt_label(p) for p in pred)
    else:
        lines.extend(
            _fmt_label(p) + " " + " ".join(format(float(v), ".6g") for v in row) for p, row in zip(pred, extra)
        )
    text = "\n".join(lines) + "\n"
    if out_path is not None:
        from .io._atomic import atomic_write

        atomic_write(out_path, lambda fh: fh.write(text), mode="w")
    else:
        click.echo(text, nl=False)
    if ds.y is not None:
        summary_to_err = out_path is None
        for line in _score_lines(est, pred, ds.y):
            _echo(ctx, line, err=summary_to_err)
    if out_path is not None:
        _echo(ctx, f"{len(pred)} predictions written to {out_path}")


def _score_lines(est, pred, y):
    import numpy as np

    kind = _kind(est)
    n = len(y)
    if kind == "regressor":
        mse = float(np.mean((pred - y) ** 2))
        return [
            f"Mean squared error = {mse:.6g} (regression)",
            f"Squared correlation coefficient = {_squared_correlation(pred, y):.6g} (regression)",
        ]
    correct = int(np.sum(pred == y))
    return [f"Accuracy = {100 * correct / n:.4f}% ({correct}/{n}) (classification)"]


# --------------------------------------------------------------------------- evaluate


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", type=DataPath(allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@data_options
@common_options
@click.pass_context
def evaluate(ctx, model_path, data, as_json, data_format, delimiter, header, label_column):
    """Score MODEL on labelled DATA: accuracy, confusion matrix, precision and recall per class
    (regression: MSE, R^2)."""
    import json

    import numpy as np

    kwargs = _data_kwargs(data_format, delimiter, header, label_column)
    model, kind, ds = _load_model_and_data(model_path, data, kwargs, True)
    est = _final(model)
    pred = model.predict(ds.X)
    y = ds.y
    n = len(y)
    name = os.path.basename(ds.path)
    if _kind(est) == "regressor":
        from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

        res = {
            "n_samples": n,
            "mse": float(mean_squared_error(y, pred)),
            "mae": float(mean_absolute_error(y, pred)),
            "r2": float(r2_score(y, pred)) if n > 1 else None,
            "squared_correlation": _squared_correlation(pred, y),
        }
        if as_json:
            click.echo(json.dumps(res, indent=2))
            return
        click.echo(f"{os.path.basename(model_path)} on {name}: {n:,} samples (regression)")
        click.echo(f"  mean squared error      {_fmt(res['mse'], 6)}")
        click.echo(f"  root mean squared error {_fmt(math.sqrt(res['mse']), 6)}")
        click.echo(f"  mean absolute error     {_fmt(res['mae'], 6)}")
        click.echo(f"  R^2                     {_fmt(res['r2'], 6)}")
        return
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    labels = np.unique(np.concatenate([np.asarray(getattr(est, "classes_", [])), np.unique(y), np.unique(pred)]))
    cm = confusion_matrix(y, pred, labels=labels)
    prec, rec, f1, support = precision_recall_fscore_support(y, pred, labels=labels, zero_division=0)
    correct = int(np.sum(pred == y))
    res = {
        "n_samples": n,
        "accuracy": correct / n,
        "correct": correct,
        "labels": [_fmt_label(c) for c in labels],
        "confusion_matrix": cm.tolist(),
        "per_class": {
            _fmt_label(c): {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for c, p, r, f, s in zip(labels, prec, rec, f1, support)
        },
    }
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    click.echo(f"{os.path.basename(model_path)} on {name}: {n:,} samples")
    click.echo(f"Accuracy = {100 * correct / n:.4f}% ({correct}/{n})")
    click.echo("")
    click.echo("Confusion matrix (rows: true label, columns: predicted label)")
    names = res["labels"]
    w = max(6, max(len(s) for s in names) + 1, len(str(int(cm.max()))) + 1 if cm.size else 1)
    click.echo(" " * (w + 2) + "".join(s.rjust(w) for s in names))
    for s, row in zip(names, cm):
        click.echo(f"  {s.rjust(w)}" + "".join(str(int(v)).rjust(w) for v in row))
    click.echo("")
    click.echo("  " + "class".rjust(w) + "precision".rjust(11) + "recall".rjust(9) + "f1".rjust(8) + "support".rjust(9))
    for s, p, r, f, sup in zip(names, prec, rec, f1, support):
        click.echo(f"  {s.rjust(w)}{p:11.4f}{r:9.4f}{f:8.4f}{int(sup):9d}")


# --------------------------------------------------------------------------- info


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@common_options
def info(model_path, as_json):
    """Describe a model file (maxmargin, LIBSVM or LIBLINEAR): type, kernel, parameters, support vectors,
    margin, LOO bound, objective, training time, format version."""
    import json

    import numpy as np

    from .io import is_liblinear_model, is_libsvm_model, load_liblinear_model, load_libsvm_model, load_model

    size = os.path.getsize(model_path)
    file_format = "maxmargin"
    if is_libsvm_model(model_path):
        model, meta, file_format = load_libsvm_model(model_path), None, "libsvm"
    elif is_liblinear_model(model_path):
        model, meta, file_format = load_liblinear_model(model_path), None, "liblinear"
    else:
        model, meta = load_model(model_path, return_metadata=True)
    foreign = {"libsvm": "LIBSVM", "liblinear": "LIBLINEAR"}.get(file_format)
    est = _final(model)
    nums = _summary_numbers(est)
    params = {k: v for k, v in est.get_params().items() if k != "callback"}
    d = {
        "file": model_path,
        "file_format": file_format,
        "format_version": None if meta is None else meta["format_version"],
        "size_bytes": size,
        "created": None if meta is None else meta.get("created"),
        "maxmargin_version": None if meta is None else meta.get("maxmargin_version"),
        "class": type(est).__name__,
        "type": _type_name(est),
        "kernel": getattr(est, "kernel", None),
        "gamma": getattr(est, "_gamma", None),
        "params": {
            k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)) for k, v in params.items()
        },
        "n_features": getattr(est, "n_features_in_", None),
        "classes": None if getattr(est, "classes_", None) is None else [_fmt_label(c) for c in est.classes_],
        "n_support": None if getattr(est, "n_support_", None) is None else [int(v) for v in est.n_support_],
        "n_support_total": None if getattr(est, "support_", None) is None else int(len(est.support_)),
        "margin": _jsonable(nums["margin"]),
        "half_width": _jsonable(nums["half_width"]),
        "loo_bound": _jsonable(nums["loo_bound"]),
        "objective": _jsonable(nums["objective"]),
        "n_iter": nums["n_iter"],
        "fit_status": getattr(est, "fit_status_", None),
        "fit_time": _jsonable(getattr(est, "fit_time_", None)),
        "preprocessing": [type(s).__name__ for _, s in model.steps[:-1]] if hasattr(model, "steps") else [],
        "info": {} if meta is None else meta.get("info", {}),
    }
    if as_json:
        click.echo(json.dumps(d, indent=2, default=str))
        return
    kb = size / 1024
    if meta is None:
        click.echo(f"File             {model_path} ({foreign} model file, {kb:.1f} kB)")
    else:
        click.echo(
            f"File             {model_path} (maxmargin model, format version {meta['format_version']}, "
            f"{kb:.1f} kB, written {meta.get('created', '?')} by maxmargin {meta.get('maxmargin_version', '?')})"
        )
    kind = _kind(est)
    what = {"classifier": "classification", "regressor": "regression", "outlier_detector": "novelty detection"}
    line = f"Type             {type(est).__name__} ({_type_name(est)}, {what.get(kind, kind)})"
    if d["classes"] is not None:
        line += f", {len(d['classes'])} classes: {', '.join(d['classes'])}"
    click.echo(line)
    click.echo(f"Kernel           {_kernel_text(est, sigma=True)}")
    if file_format == "liblinear":
        shown = {
            k: d["params"][k] for k in ("penalty", "loss", "dual", "multi_class", "fit_intercept") if k in d["params"]
        }
        if d["params"].get("fit_intercept"):
            shown["intercept_scaling"] = d["params"]["intercept_scaling"]
        from .linear import SOLVER_NAMES

        solver = SOLVER_NAMES.get(getattr(est, "solver_type_", None), "?")
        click.echo(_wrap("Parameters       ", f"solver_type {solver}, {_fmt_params(shown)} (C and tol are not stored)"))
    elif meta is None:
        click.echo("Parameters       not stored in LIBSVM model files (only the kernel's)")
    else:
        shown = {k: v for k, v in d["params"].items() if k not in ("kernel", "gamma", "degree", "coef0", "verbose")}
        click.echo(_wrap("Parameters       ", _fmt_params(shown)))
    if d["preprocessing"]:
        click.echo(f"Preprocessing    {', '.join(d['preprocessing'])} (applied by predict)")
    click.echo(f"Features         {d['n_features']}")
    click.echo(f"Support vectors  {_sv_text(est)}")
    unknown = f" (not stored in {foreign} model files)" if meta is None else ""
    no_margin = nums["margin"] is None or bool(np.all(np.isnan(nums["margin"])))
    meaning = _margin_meaning(est)
    if meaning.startswith("min"):
        meaning += " over the training points"
    click.echo(
        f"Margin           {_fmt_multi(nums['margin'], _problems_unit(est))}"
        + (unknown if no_margin else f"   ({meaning})")
    )
    if nums["half_width"] is not None and not bool(np.all(np.isnan(nums["half_width"]))):
        click.echo(f"1/||w||          {_fmt_multi(nums['half_width'])}   (half-width of the band |f| < 1)")
    elif file_format == "libsvm":
        click.echo(f"1/||w||          unknown{unknown}")
    click.echo(f"LOO bound        {_fmt(nums['loo_bound'])}")
    click.echo(f"Objective        {_fmt_multi(nums['objective'], _problems_unit(est))}")
    info_d = d["info"] or {}
    train_bits = []
    ft = getattr(est, "fit_time_", None)
    if ft is not None and not (isinstance(ft, float) and math.isnan(ft)):
        train_bits.append(f"{float(ft):.3f} s")
    if nums["n_iter"]:
        train_bits.append(f"{nums['n_iter']:,} iterations")
    fs = getattr(est, "fit_status_", None)
    if meta is not None and fs is not None:
        train_bits.append("converged" if fs == 0 else "stopped before convergence")
    if info_d.get("train_file"):
        n_train = info_d.get("n_samples")
        n_text = f"{n_train:,}" if isinstance(n_train, int) else "?"
        train_bits.append(f"data {info_d['train_file']} ({n_text} samples)")
    click.echo(f"Training         {', '.join(train_bits) if train_bits else 'unknown'}")


def _wrap(label, text, width=100):
    import textwrap

    return textwrap.fill(
        text, width=width, initial_indent=label, subsequent_indent=" " * len(label), break_on_hyphens=False
    )


def _jsonable(v):
    import numpy as np

    if v is None:
        return None
    if isinstance(v, np.ndarray):
        return [None if math.isnan(x) else float(x) for x in v.tolist()]
    f = float(v)
    return None if math.isnan(f) else f


# --------------------------------------------------------------------------- quickstart


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "-o",
    "--output",
    "model_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also save the trained model here (then try `maxmargin info` on it).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the train/test split.")
@common_options
@click.pass_context
def quickstart(ctx, model_path, seed):
    """Train an SVM on a small real data set shipped with maxmargin and explain the results."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    import maxmargin

    from .datasets import load_heart_scale

    X, y = load_heart_scale()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    params = {"kernel": "rbf", "C": 1.0, "gamma": "scale"}
    clf = maxmargin.SVC(**params)
    say = click.echo
    say("maxmargin quickstart: a support vector machine on LIBSVM's heart_scale data")
    say("")
    say(
        f"  data    {X.shape[0]} patients, {X.shape[1]} features scaled to [-1, 1], "
        f"label +1 = heart disease ({int(np.sum(y == 1))}), -1 = none ({int(np.sum(y == -1))})"
    )
    say(f"  split   {len(ytr)} for training, {len(yte)} held out for testing (stratified, seed {seed})")
    say("  model   maxmargin.SVC(kernel='rbf', C=1.0, gamma='scale')")
    say("")
    t0 = time.perf_counter()  # the first fit in a process compiles (or loads) the solver: time it apart
    maxmargin.SVC(**params).fit(Xtr[:20], ytr[:20])
    warmup = time.perf_counter() - t0
    seconds = _fit(ctx, clf, Xtr, ytr)
    acc = float(np.mean(clf.predict(Xte) == yte))
    n_sv = int(clf.support_.shape[0])
    margin = float(np.atleast_1d(clf.margin_)[0])
    w_norm = getattr(clf, "w_norm_", None)
    half = None if w_norm is None else 1.0 / float(np.atleast_1d(w_norm)[0])
    objective = float(np.atleast_1d(clf.objective_)[0])
    iters = int(np.sum(clf.n_iter_))
    correct = int(round(acc * len(yte)))
    ns = {_fmt_label(c): int(k) for c, k in zip(clf.classes_, clf.n_support_)}
    say(f"Trained: {iters:,} solver iterations; gamma='scale' gave gamma = {_fmt(clf._gamma)}")
    say("")
    say("Results")
    ns_text = f"-1: {ns.get('-1', 0)}, +1: {ns.get('1', 0)}"
    rows = [
        ("test accuracy", f"{100 * acc:.1f}%", f"{correct} of {len(yte)} held-out patients classified correctly"),
        ("support vectors", f"{n_sv}", f"of {len(ytr)} training points ({ns_text}) lie on or inside the margin"),
    ]
    if half is not None:
        rows.append(
            ("band half-width", f"{half:.4f}", "1/||w||: distance from the boundary f=0 to the lines f=+1 and f=-1")
        )
    rows.append(
        (
            "margin",
            f"{margin:.4f}",
            "smallest y f(x)/||w|| over the training points"
            + (
                "; negative: some training points lie on the wrong side, which a soft margin allows"
                if margin < 0
                else ""
            ),
        )
    )
    rows += [
        (
            "LOO bound",
            f"{clf.loo_bound_:.4f}",
            f"#SV/n bounds the leave-one-out error rate (test error: {1 - acc:.4f})",
        ),
        ("dual objective", f"{objective:.2f}", "the minimum of the dual problem the solver reached"),
        (
            "fit time",
            f"{clf.fit_time_:.3f} s",
            f"time spent in SVC.fit (after {warmup:.2f} s of one-time solver start-up in this process)",
        ),
    ]
    import textwrap

    for name, value, text in rows:
        head = f"  {name:<17}{value:>9}   "
        say(textwrap.fill(text, width=100, initial_indent=head, subsequent_indent=" " * len(head)))
    if model_path is not None:
        from .io import save_model

        save_model(
            clf,
            model_path,
            info={
                "train_file": "heart_scale (bundled)",
                "n_samples": int(len(ytr)),
                "n_features": int(X.shape[1]),
                "fit_time": float(seconds),
            },
        )
        say("")
        say(f"Model written to {model_path}: try  maxmargin info {model_path}")
    say("")
    say("Next: your own data (CSV with the label in the first column, or LIBSVM format):")
    say("  maxmargin train data.csv -o model.mm        (add --cv 5 to cross-validate instead)")
    say("  maxmargin predict model.mm new.csv -o predictions.txt")
    say("  maxmargin evaluate model.mm test.csv")
    say("  maxmargin train --help                      (kernels, C, gamma, formulations, solvers)")


# --------------------------------------------------------------------------- datasets


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option("--paths", is_flag=True, help="Print only the file paths, one per line.")
def datasets(paths):
    """List the data sets bundled with maxmargin.

    \b
    Every command that reads data takes them by name:
      maxmargin train heart_scale --cv 5              (a file of that name in the current directory wins)
      maxmargin train builtin:heart_scale -o heart.mm (always the bundled one)
    """
    from .datasets import DATASETS, PREFIX, dataset_path

    for name in sorted(DATASETS):
        if paths:
            click.echo(dataset_path(name))
        else:
            click.echo(f"{PREFIX}{name}  {DATASETS[name][1]}")
            click.echo(f"  {dataset_path(name)}")


# --------------------------------------------------------------------------- plot and playground


def _optional_module(modname, command, extra, packages):
    import importlib

    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name == modname:
            raise CLIError(f"`maxmargin {command}` is not available: {modname} is missing from this installation")
        raise CLIError(f"`maxmargin {command}` needs {exc.name}", f"install it with: pip install 'maxmargin[{extra}]'")


def _parse_opt_value(text):
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", type=DataPath())
@click.option(
    "-o",
    "--output",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Image file to write; the suffix picks the format (default: MODEL's name + .png).",
)
@click.option("--test", "test_path", type=DataPath(), default=None, help="Test data, drawn as small points.")
@click.option("--dpi", type=int, default=None, help="Resolution of raster images.")
@click.option(
    "-O",
    "--opt",
    "opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Option for the drawing, e.g. -O resolution=300 -O show_margins=false (repeatable).",
)
@common_options
@click.pass_context
def plot(ctx, model_path, data, out_path, test_path, dpi, opts):
    """Draw MODEL over DATA (decision regions, boundary, margins, support vectors) to an image."""
    mod = _optional_module("maxmargin.plot", "plot", "plot", "matplotlib")
    kwargs = {}
    for o in opts:
        key, sep, value = o.partition("=")
        if not sep or not key.strip().isidentifier():
            raise click.BadParameter(f"{o!r}: write KEY=VALUE", param_hint="-O/--opt")
        kwargs[key.strip()] = _parse_opt_value(value.strip())
    if test_path is not None:
        kwargs["test_path"] = test_path
    if dpi is not None:
        kwargs["dpi"] = dpi
    if out_path is None:
        out_path = os.path.splitext(os.path.basename(model_path))[0] + ".png"
    _refuse_overwrite(
        out_path, [("model file MODEL", model_path), ("data file DATA", data), ("test data file", test_path)]
    )
    try:
        mod.plot_model_file(model_path, data, out_path, **kwargs)
    except ModuleNotFoundError as exc:
        raise CLIError(f"`maxmargin plot` needs {exc.name}", "install it with: pip install 'maxmargin[plot]'")
    _echo(ctx, f"Picture written to {out_path}")


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port (0: any free port).")
@click.option("--browser/--no-browser", default=True, show_default=True, help="Open the page in a browser.")
@common_options
def playground(host, port, browser):
    """Start the interactive playground (a local web page) and open it in a browser."""
    mod = _optional_module("maxmargin.playground", "playground", "playground", "starlette, uvicorn")
    try:
        mod.serve(host=host, port=port, open_browser=browser)
    except ModuleNotFoundError as exc:
        raise CLIError(
            f"`maxmargin playground` needs {exc.name}", "install it with: pip install 'maxmargin[playground]'"
        )


@cli.command(context_settings=CONTEXT_SETTINGS)
@common_options
def precompile():
    """Compile the solvers now, once, instead of in the first fit (about 8 s right after install).

    \b
    Numba keeps what it compiles in its on-disk cache; run this as a step of an install
    script or an image build, and every later process starts in a fraction of a second.
    """
    from .warmup import precompile as run

    click.echo("Compiling the solvers (kept in Numba's on-disk cache):")
    t = time.perf_counter()
    run(verbose=True)
    click.echo(f"Done in {time.perf_counter() - t:.1f} s.")


# --------------------------------------------------------------------------- entry point


def main(argv=None):
    """Console-script entry point (``maxmargin``); ``argv`` defaults to ``sys.argv[1:]``."""
    return cli.main(args=argv, prog_name="maxmargin")


if __name__ == "__main__":  # pragma: no cover
    main()

"""maxmargin: support vector machines, every classical formulation and solver.

Quick start::

    from maxmargin import SVC
    clf = SVC(C=1.0, kernel="rbf", gamma="scale").fit(X, y)
    clf.predict(X_test), clf.margin_, clf.loo_bound_
"""

from .kernels import make_kernel
from .svm import SVC

__version__ = "0.1.0"

__all__ = ["SVC", "make_kernel", "__version__"]
from .linear import LinearSVC, LinearSVR
from .oneclass import OneClassSVM
from .regression import SVR, NuSVR
from .svm import NuSVC

__all__ += ["NuSVC", "SVR", "NuSVR", "OneClassSVM", "LinearSVC", "LinearSVR"]
from . import datasets
from .io import (
    DataFormatError,
    ModelFormatError,
    load_data,
    load_liblinear_model,
    load_libsvm_model,
    load_model,
    save_liblinear_model,
    save_libsvm_model,
    save_model,
)

__all__ += [
    "save_model",
    "load_model",
    "load_libsvm_model",
    "save_libsvm_model",
    "load_data",
    "DataFormatError",
    "ModelFormatError",
    "datasets",
    "load_liblinear_model",
    "save_liblinear_model",
]
from ._scratch import release as release_scratch

__all__ += ["release_scratch"]

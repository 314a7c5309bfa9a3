"""Solvers: one module each; every one returns a :class:`~maxmargin.solvers.base.Solution`."""

from .base import Solution

__all__ = ["Solution"]

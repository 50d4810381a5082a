"""A small Bayesian linear model over a space's params: what a study's few trials say of the next one.

The cost-aware search (:mod:`autotune.search.costaware`) asks two questions of a study's own trials: how much
better a configuration may be (the gain), and how many seconds its trial will take (the cost,
:mod:`autotune.search.costmodel`). Both answer with the same model, fitted in log space where knobs act as factors
(bf16 multiplies throughput, compiling adds a compile): each param's value is a column (a categorical one
column per choice; an int or float its position in its range, log-scaled where the distribution is, and an
int of a few values also one column per value), and the model is Bayesian linear regression over them
(Bishop, "Pattern Recognition and Machine Learning", 3.3): a Gaussian prior on each column's effect, the
noise level chosen by the evidence, a predictive mean and standard deviation for any configuration.

With a handful of trials the prior keeps effects small (a level never measured adds uncertainty, not a
guess), and the mean is the ridge regression's. The targets are standardised, so the prior is unit-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

__all__ = ["Encoding", "LinearModel", "expected_improvement", "fit_linear"]

FEW_VALUES = 16  # an int param with at most this many values gets a column per value besides its position
# Noise variances tried (standardised targets unless told otherwise): the one of best evidence wins.
NOISE_GRID = (1e-4, 3e-4, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)


class Encoding:
    """Params to columns, for the params of ``distributions`` (others, fixed knobs, are left out)."""

    def __init__(self, distributions: Mapping[str, BaseDistribution]) -> None:
        self.columns: list[str] = []
        self._parts: list[tuple[str, BaseDistribution]] = sorted(distributions.items())
        for name, distribution in self._parts:
            if isinstance(distribution, CategoricalDistribution):
                self.columns += [f"{name}={choice!r}" for choice in distribution.choices]
            elif isinstance(distribution, IntDistribution | FloatDistribution):
                self.columns.append(name)
                if _few_ints(distribution):
                    self.columns += [f"{name}={v}" for v in _int_values(distribution)]

    def row(self, params: Mapping[str, Any]) -> np.ndarray:
        """The columns of one configuration (a param it lacks leaves its columns at zero)."""
        out: list[float] = []
        for name, distribution in self._parts:
            value = params.get(name)
            if isinstance(distribution, CategoricalDistribution):
                out += [1.0 if value is not None and _same(value, c) else 0.0 for c in distribution.choices]
            elif isinstance(distribution, IntDistribution | FloatDistribution):
                out.append(_position(distribution, value))
                if _few_ints(distribution):
                    out += [1.0 if value is not None and value == v else 0.0 for v in _int_values(distribution)]
        return np.asarray(out, dtype=float)

    def matrix(self, configurations: Sequence[Mapping[str, Any]]) -> np.ndarray:
        if not configurations:
            return np.zeros((0, len(self.columns)))
        return np.vstack([self.row(params) for params in configurations])


def _same(value: Any, choice: Any) -> bool:
    return type(value) is type(choice) and value == choice  # True is not 1, "64" is not 64


def _few_ints(distribution: BaseDistribution) -> TypeGuard[IntDistribution]:
    if not isinstance(distribution, IntDistribution) or distribution.log:
        return False
    return (distribution.high - distribution.low) // distribution.step + 1 <= FEW_VALUES


def _int_values(distribution: IntDistribution) -> range:
    return range(distribution.low, distribution.high + 1, distribution.step)


def _position(distribution: IntDistribution | FloatDistribution, value: Any) -> float:
    """Where ``value`` lies in its range, 0 to 1 (log-scaled for a log distribution); 0 when absent."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    low, high, x = float(distribution.low), float(distribution.high), float(value)
    if distribution.log and low > 0 and x > 0:
        low, high, x = math.log(low), math.log(high), math.log(x)
    return (x - low) / (high - low) if high > low else 0.0


@dataclass(frozen=True)
class LinearModel:
    """A fitted Bayesian linear model: posterior mean and covariance of the effects, on standardised targets."""

    weights: np.ndarray
    covariance: np.ndarray
    offset: float
    scale: float
    noise: float  # the noise variance chosen, standardised

    def predict(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and standard deviation (of the mean function, without noise) for each row."""
        rows = np.atleast_2d(rows)
        mean = rows @ self.weights
        variance = np.einsum("ij,jk,ik->i", rows, self.covariance, rows)
        return self.offset + self.scale * mean, self.scale * np.sqrt(np.maximum(variance, 0.0))


def fit_linear(
    rows: np.ndarray, targets: Sequence[float], prior: float | Sequence[float] = 1.0, *, standardise: bool = True
) -> LinearModel:
    """The posterior of ``targets ~ mean + rows @ w + noise`` under ``w ~ N(0, prior)`` (a variance, or one per
    column), the targets standardised first unless ``standardise`` is False (then ``prior`` is in their units).

    The noise variance is the one of :data:`NOISE_GRID` with the highest evidence (the marginal likelihood).
    With no targets the model predicts 0 with the prior's spread; with one, that target.
    """
    y = np.asarray(targets, dtype=float)
    rows = np.atleast_2d(np.asarray(rows, dtype=float)).reshape(len(y), -1)
    columns = rows.shape[1]
    variances = np.broadcast_to(np.asarray(prior, dtype=float), (columns,)).copy()
    if np.any(variances <= 0):
        raise ValueError(f"prior variances must be > 0, got {prior=}")
    if len(y) == 0:
        return LinearModel(np.zeros(columns), np.diag(variances), 0.0, 1.0, NOISE_GRID[-1])
    offset = float(y.mean())
    scale = float(y.std()) if standardise and len(y) > 1 and y.std() > 1e-12 else 1.0
    z = (y - offset) / scale
    gram, projected = rows.T @ rows, rows.T @ z
    best: tuple[float, float, np.ndarray] | None = None
    for noise in NOISE_GRID:
        # In the columns' space (columns x columns, however many trials): with A = prior^-1 + X'X / noise, the
        # evidence's covariance X prior X' + noise I has log det = log|A| + log|prior| + n log noise (the matrix
        # determinant lemma) and inverse-quadratic form z'z / noise - b' A^-1 b, b = X'z / noise (Woodbury).
        precision = gram / noise + np.diag(1.0 / variances)
        sign, logdet = np.linalg.slogdet(precision)
        if sign <= 0:
            continue
        b = projected / noise
        quadratic = z @ z / noise - b @ np.linalg.solve(precision, b)
        evidence = -0.5 * (quadratic + logdet + np.sum(np.log(variances)) + len(z) * np.log(noise))
        if best is None or evidence > best[0]:
            best = (evidence, noise, precision)
    noise, precision = (best[1], best[2]) if best is not None else (1.0, gram + np.diag(1.0 / variances))
    covariance = np.linalg.inv(precision)
    weights = covariance @ projected / noise
    return LinearModel(weights, covariance, offset, scale, noise)


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement over ``best`` of a Gaussian belief (maximising): E[max(0, f - best)]."""
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    gain = mean - best
    safe = np.where(sd > 1e-12, sd, 1.0)
    z = gain / safe
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    ei = gain * cdf + safe * pdf
    return np.where(sd > 1e-12, np.maximum(ei, 0.0), np.maximum(gain, 0.0))

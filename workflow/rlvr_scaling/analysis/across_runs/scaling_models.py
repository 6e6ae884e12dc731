"""Small models of a phase's time against the node count, one per phase and series, as Extra-P
builds them: a few forms (a fixed part; a part that shrinks as 1/N, the work each engine gets under
strong scaling; a part that grows with log N, collectives and start-up spread), fitted by least
squares and chosen by leave-one-out cross-validation, with 95% prediction intervals, so that node
counts not measured can be predicted."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlvr_scaling.measured.stats import t_quantile

Terms = Callable[[float], list[float]]
FORMS: dict[str, Terms] = {
    "a": lambda n: [1.0],
    "a + b/N": lambda n: [1.0, 1.0 / n],
    "a + c log2(N)": lambda n: [1.0, math.log2(n)],
    "a + b/N + c log2(N)": lambda n: [1.0, 1.0 / n, math.log2(n)],
}


@dataclass(frozen=True)
class Model:
    form: str
    coefficients: tuple[float, ...]
    cv_rmse: float  # leave-one-out: the error of predicting each measured point from the others
    residual_std: float
    dof: int
    covariance: tuple[tuple[float, ...], ...]  # (X'X)^-1

    def predict(self, nodes: float) -> tuple[float, float, float]:
        """The model's time at `nodes`, with its 95% prediction interval."""
        x = np.array(FORMS[self.form](nodes))
        value = float(x @ np.array(self.coefficients))
        spread = self.residual_std * math.sqrt(1 + float(x @ np.array(self.covariance) @ x))
        half = t_quantile(0.975, self.dof) * spread
        return value, value - half, value + half


def _design(form: str, nodes: list[float]) -> np.ndarray:
    return np.array([FORMS[form](n) for n in nodes])


def _least_squares(form: str, nodes: list[float], times: list[float]) -> np.ndarray:
    return np.linalg.lstsq(_design(form, nodes), np.array(times), rcond=None)[0]


def loo_rmse(form: str, nodes: list[float], times: list[float]) -> float:
    errors = []
    for left_out in range(len(nodes)):
        kept = [i for i in range(len(nodes)) if i != left_out]
        coefficients = _least_squares(form, [nodes[i] for i in kept], [times[i] for i in kept])
        errors.append(float(_design(form, [nodes[left_out]])[0] @ coefficients) - times[left_out])
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def fit(form: str, nodes: list[float], times: list[float]) -> Model:
    design = _design(form, nodes)
    coefficients = _least_squares(form, nodes, times)
    residuals = np.array(times) - design @ coefficients
    dof = len(nodes) - design.shape[1]
    return Model(
        form=form,
        coefficients=tuple(float(c) for c in coefficients),
        cv_rmse=loo_rmse(form, nodes, times),
        residual_std=math.sqrt(float(residuals @ residuals) / dof),
        dof=dof,
        covariance=tuple(tuple(float(v) for v in row) for row in np.linalg.inv(design.T @ design)),
    )


# With five or so points, leave-one-out errors are themselves noisy: a form with more terms is taken
# only if no simpler form predicts the left-out points within this factor of the best.
PARSIMONY = 1.5


def choose_model(nodes: list[float], times: list[float]) -> Model | None:
    """The simplest form that predicts left-out points about as well as the best (PARSIMONY). A
    form needs two more points than terms: one for its interval, one to be left out."""
    distinct = len(set(nodes))
    candidates = [fit(form, nodes, times) for form in FORMS if len(FORMS[form](1.0)) + 2 <= distinct]
    if not candidates:
        return None
    best = min(model.cv_rmse for model in candidates)
    ranked = sorted(candidates, key=lambda m: (len(m.coefficients), m.cv_rmse))
    return next(m for m in ranked if m.cv_rmse <= best * PARSIMONY + 1e-12)

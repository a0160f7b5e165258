"""The bootstrap the acceptance measure uses: percentile confidence intervals over a window's
samples, deterministic for a seeded generator and bounded in memory and time.

Up to :data:`EXACT_MAX` samples, resamples are drawn (in chunks of at most :data:`CHUNK`
elements); above it the resample medians are drawn exactly from their order-statistic law in
O(resamples) and the mean's interval is the normal approximation, so a 2-million-sample log
costs a sort, not resamples × samples draws.
"""

from __future__ import annotations

import numpy as np

#: elements of one resample chunk (indices and values): bounds the bootstrap's memory
CHUNK = 1 << 20
#: the most samples a side is bootstrapped by resampling (resamples × samples draws); above it
#: the medians come from order statistics and the mean's CI from the normal approximation
EXACT_MAX = 20_000
#: the standard normal's 97.5 % quantile
Z975 = 1.959963984540054


def draw(values: np.ndarray, rng: np.random.Generator,
          resamples: int) -> tuple[tuple[float, float] | None, np.ndarray]:  # fmt: skip
    """The mean's 95 % CI and ``resamples`` bootstrap medians of ``values`` (None and none with
    fewer than 2): by resampling up to :data:`EXACT_MAX` values, above it by order statistics
    and the normal approximation (resampling costs resamples × values draws)."""
    if len(values) < 2:
        return None, np.empty(0)
    if len(values) <= EXACT_MAX:
        means, medians = resample(values, rng, resamples)
        return percentiles(means), medians
    mean = float(np.mean(values))
    half = Z975 * float(np.std(values, ddof=1)) / np.sqrt(len(values))
    return (mean - half, mean + half), order_medians(np.sort(values), rng, resamples)


def order_medians(ordered: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` medians of resamples (with replacement) of the sorted ``ordered``, drawn
    exactly in O(resamples): a resample's m-th order statistic is F_n^-1(U_(m)), U_(m) ~
    Beta(m, n-m+1) the m-th of n uniforms; for even n the median is the mean of the m-th and
    (m+1)-th, U_(m+1) = U_(m) + (1 - U_(m)) · Beta(1, n-m) (the least of the n-m uniforms above
    U_(m))."""
    n = len(ordered)
    m = (n + 1) // 2  # odd n: the middle; even n: the lower of the middle two
    u = rng.beta(m, n - m + 1, resamples)
    low = ordered[_quantile_index(u, n)]
    if n % 2:
        return low
    upper = u + (1 - u) * rng.beta(1, n - m, resamples)
    return (low + ordered[_quantile_index(upper, n)]) / 2


def _quantile_index(u: np.ndarray, n: int) -> np.ndarray:
    """F_n^-1(u) as an index into the sorted values: the ceil(n·u)-th smallest."""
    return np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)


def resample(values: np.ndarray, rng: np.random.Generator,
               resamples: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The means and medians of ``resamples`` resamples (with replacement) of ``values``, both
    from the same draws, made in chunks of at most :data:`CHUNK` elements."""
    n = len(values)
    rows = max(1, CHUNK // n)
    means = np.empty(resamples, dtype=np.float64)
    medians = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows):
        m = min(rows, resamples - start)
        drawn = values[rng.integers(0, n, size=(m, n))]
        means[start : start + m] = drawn.mean(axis=1)
        medians[start : start + m] = row_medians(drawn)
    return means, medians


def row_medians(drawn: np.ndarray) -> np.ndarray:
    """Each row's median (the middle value, or the mean of the middle two), by a partial sort:
    half the time of ``np.median`` on the bootstrap's wide rows."""
    n = drawn.shape[1]
    k = n // 2
    if n % 2:
        return np.partition(drawn, k, axis=1)[:, k]
    middle = np.partition(drawn, (k - 1, k), axis=1)
    return (middle[:, k - 1] + middle[:, k]) / 2


def percentiles(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)

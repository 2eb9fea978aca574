"""Proof, not hope: the certificate and the quality interval tried against populations whose truth is known.

1. The certificate. A population of items whose judge confidence c is uniform on [0.5, 1] (a judge answering a
   yes/no question is at least half sure) and whose answer agrees with people with probability c (a calibrated
   judge: it agrees with people 75% of the time overall). Calibration sets of n items are drawn from it `draws`
   times; each is certified at (alpha, delta), and the certified threshold is checked on the whole population:
   the draw meets the guarantee when the population's items at or above the threshold agree with people at least
   1-alpha of the time, or when there is no certificate (the machine decides nothing, so nothing it decided
   disagrees). The guarantee holds when the share of draws meeting it is at least 1-delta.
2. The quality interval. A population of the judge's probabilities of a pass, Beta(1.4, 0.6) (mean 0.7, most of
   them near 0 or 1, as a confident judge's are), whose items pass with people with probability 0.1 lower: a judge
   that overrates every item. Audit samples of n items are drawn without replacement `draws` times; the PPI++
   interval should cover the population's true pass rate at least 1-alpha of the time, as the people-only
   interval does, while the judge's own count misses it.

Every figure comes from a seeded generator per setting, so a run prints the same table every time and one
setting's figures do not depend on which others ran. Run: `python -m grading.certify.simulator [--draws 1000]`.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from grading.certify.quality import quality_interval
from grading.certify.thresholds import certify_arrays

SEED = 40
TARGETS = (0.80, 0.85, 0.90)
SIZES = (100, 250, 500)
DELTA = 0.1
POPULATION = 100_000
QUALITY_POPULATION = 5_000
JUDGE_BIAS = 0.1  # how much the quality population's judge overrates each item's chance of passing


def standard_error(share: float, draws: int) -> float:
    """The standard error of a share of `draws` independent draws (the binomial's)."""
    return math.sqrt(share * (1.0 - share) / draws)


@dataclass(frozen=True)
class Population:
    """Items' judge confidences, highest first, with whether each agrees with people, and the share agreeing among
    the first i + 1 of them (the selective agreement at each item's confidence)."""

    confidences: np.ndarray
    agrees: np.ndarray
    agreement_above: np.ndarray

    def agreement_at(self, threshold: float) -> float:
        """The share of the population at or above the threshold that agrees with people."""
        return float(self.agreement_above[self.covered_by(threshold) - 1])

    def covered_by(self, threshold: float) -> int:
        """How many items of the population stand at or above the threshold."""
        return int(np.searchsorted(-self.confidences, -threshold, side="right"))


@dataclass(frozen=True)
class GuaranteeRow:
    target: float  # 1-alpha
    labels: int  # n, the calibration set's size
    guarantee_share: float  # draws whose certificate held on the population (abstentions hold)
    standard_error: float  # of guarantee_share, from the number of draws
    coverage: float  # mean share of the population the machine decides alone (0 in a draw without certificate)
    abstained: float  # share of draws with no certificate
    best_coverage: float  # what the exact threshold for the target would cover, knowing the population


@dataclass(frozen=True)
class QualityRow:
    labels: int  # the audit sample's size
    ppi_coverage: float  # draws whose PPI++ interval held the true pass rate
    standard_error: float
    people_coverage: float  # the same for the people-only interval
    judge_misses: float  # how far the judge's own count is from the true pass rate (it has no interval)
    ppi_width: float  # mean width of the PPI++ interval
    people_width: float
    effective_gain: float  # mean of (people width / PPI++ width)^2


def calibrated_population(*, size: int = POPULATION, seed: int = SEED) -> Population:
    """Confidence uniform on [0.5, 1], agreeing with people with probability equal to the confidence."""
    rng = np.random.default_rng([seed, size])
    confidences = np.sort(rng.uniform(0.5, 1.0, size))[::-1]
    agrees = rng.random(size) < confidences
    return Population(confidences, agrees, np.cumsum(agrees) / np.arange(1, size + 1))


def guarantee_rows(
    *,
    targets: tuple[float, ...] = TARGETS,
    sizes: tuple[int, ...] = SIZES,
    delta: float = DELTA,
    draws: int = 1_000,
    seed: int = SEED,
) -> list[GuaranteeRow]:
    """Per target and calibration size, how often the certificate held on the whole population, and what it
    covered. Calibration items are drawn uniformly with replacement, i.e. independently from the population."""
    population = calibrated_population(seed=seed)
    size = len(population.confidences)
    rows = []
    for target in targets:
        alpha = 1.0 - target
        best = int(np.flatnonzero(population.agreement_above >= target)[-1]) + 1
        for labels in sizes:
            rng = np.random.default_rng([seed, labels, round(target * 1000)])
            held, covered, abstained = 0, 0.0, 0
            for _ in range(draws):
                drawn = rng.integers(0, size, labels)
                certificate = certify_arrays(
                    population.confidences[drawn], population.agrees[drawn], alpha=alpha, delta=delta
                )
                if certificate.threshold is None:
                    held, abstained = held + 1, abstained + 1
                    continue
                held += population.agreement_at(certificate.threshold) >= target
                covered += population.covered_by(certificate.threshold) / size
            share = held / draws
            rows.append(
                GuaranteeRow(
                    target=target,
                    labels=labels,
                    guarantee_share=share,
                    standard_error=standard_error(share, draws),
                    coverage=covered / draws,
                    abstained=abstained / draws,
                    best_coverage=best / size,
                )
            )
    return rows


def quality_rows(
    *,
    sizes: tuple[int, ...] = SIZES,
    alpha: float = 0.05,
    draws: int = 1_000,
    population: int = QUALITY_POPULATION,
    seed: int = SEED,
) -> list[QualityRow]:
    """Per audit size, how often the PPI++ and the people-only intervals held the population's true pass rate."""
    rng = np.random.default_rng([seed, population])
    judge = rng.beta(1.4, 0.6, population)
    passes = (rng.random(population) < np.clip(judge - JUDGE_BIAS, 0.0, 1.0)).astype(float)
    truth = float(passes.mean())
    rows = []
    for labels in sizes:
        rng = np.random.default_rng([seed, labels])
        ppi_held = people_held = 0
        ppi_width = people_width = gain = misses = 0.0
        for _ in range(draws):
            audited = np.zeros(population, dtype=bool)
            audited[rng.choice(population, labels, replace=False)] = True
            interval = quality_interval(
                people=passes[audited], judge_labelled=judge[audited], judge_unlabelled=judge[~audited], alpha=alpha
            )
            assert interval is not None  # at least two audited items
            ppi_held += interval.low <= truth <= interval.high
            people_held += interval.people_low <= truth <= interval.people_high
            ppi_width += interval.high - interval.low
            people_width += interval.people_high - interval.people_low
            gain += interval.effective_gain or 0.0
            misses += abs(interval.judge_rate - truth)
        share = ppi_held / draws
        rows.append(
            QualityRow(
                labels=labels,
                ppi_coverage=share,
                standard_error=standard_error(share, draws),
                people_coverage=people_held / draws,
                judge_misses=misses / draws,
                ppi_width=ppi_width / draws,
                people_width=people_width / draws,
                effective_gain=gain / draws,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=SEED)
    arguments = parser.parse_args()
    print_tables(draws=arguments.draws, seed=arguments.seed)


def print_tables(*, draws: int = 1_000, seed: int = SEED) -> None:
    """Both tables as Markdown, as bench/README.md keeps them."""
    print(
        f"Certificate: {POPULATION:,} items, confidence uniform on [0.5, 1], P(agree | c) = c; "
        f"delta {DELTA}, {draws:,} calibration draws per setting"
    )
    print(
        f"| target | n | guarantee share ± s.e. (need >= {1 - DELTA:.2f}) | coverage | no certificate | best coverage |"
    )
    print("|---|---|---|---|---|---|")
    for row in guarantee_rows(draws=draws, seed=seed):
        print(
            f"| {row.target:.2f} | {row.labels} | {row.guarantee_share:.3f} ± {row.standard_error:.3f} "
            f"| {row.coverage:.3f} | {row.abstained:.3f} | {row.best_coverage:.3f} |"
        )
    print(
        f"\nQuality interval (95%): {QUALITY_POPULATION:,} items, judge's pass probability Beta(1.4, 0.6), people "
        f"pass each with probability {JUDGE_BIAS} lower; {draws:,} audit draws per size"
    )
    print(
        "| n | PPI++ coverage ± s.e. | people-only coverage | judge's count off by | PPI++ width | people width "
        "| gain |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in quality_rows(draws=draws, seed=seed):
        print(
            f"| {row.labels} | {row.ppi_coverage:.3f} ± {row.standard_error:.3f} | {row.people_coverage:.3f} "
            f"| {row.judge_misses:.3f} | {row.ppi_width:.3f} | {row.people_width:.3f} | {row.effective_gain:.2f}x |"
        )


if __name__ == "__main__":
    main()

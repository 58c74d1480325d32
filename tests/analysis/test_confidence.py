"""Section-3 statistics on hand-built samples: KS test, categories, low-confidence windows."""

import numpy as np
import pytest
from scipy.stats import ks_2samp

from cuset.analysis.confidence import (
    ScoredSample, category_stats, describe, ks_location, ks_test, low_window_stats, reference_fit, reflected_kde,
    sample_windows,
    split_by_sensitivity,
)

K = frozenset({"kernel_body"})
KT = frozenset({"kernel_body", "thread_index"})
N = frozenset()
SENS = ("kernel_body", "launch_config")


def sample(sid, conf, kinds):
    return ScoredSample(sid, np.asarray(conf, dtype=float), tuple(kinds))


def test_ks_statistic_hand_value_and_scipy_agreement():
    a, b = [0.1, 0.2, 0.3], [0.25, 0.35, 0.45]
    res = ks_test(a, b)
    assert res.statistic == pytest.approx(2 / 3)  # at x = 0.3: F_a = 1, F_b = 1/3
    ref = ks_2samp(a, b)
    assert res.pvalue == ref.pvalue and (res.n_sensitive, res.n_neutral) == (3, 3)


def test_ks_equals_scipy_on_split_arrays():
    rng = np.random.default_rng(7)
    samples = []
    for i in range(6):
        n = 50 + 10 * i
        kinds = [K if rng.random() < 0.4 else N for _ in range(n)]
        conf = [rng.beta(5, 1) if k else rng.beta(2, 2) for k in kinds]
        samples.append(sample(f"s{i}", conf, kinds))
    sens, neut = split_by_sensitivity(samples, SENS)
    assert sens.size + neut.size == sum(len(s) for s in samples)
    res = ks_test(sens, neut)
    ref = ks_2samp(sens, neut)
    assert res.statistic == ref.statistic and res.pvalue == ref.pvalue
    x, fa, fb = ks_location(sens, neut)
    assert abs(fa - fb) == pytest.approx(ref.statistic)
    assert np.mean(sens <= x) == pytest.approx(fa) and np.mean(neut <= x) == pytest.approx(fb)


def test_ks_needs_both_groups():
    with pytest.raises(ValueError, match="0 CUDA-sensitive"):
        ks_test([], [0.5])


def test_sensitivity_uses_only_the_chosen_kinds():
    s = sample("a", [0.9, 0.5, 0.1], [K, frozenset({"thread_index"}), N])
    assert s.sensitive(SENS).tolist() == [True, False, False]
    assert s.sensitive(("thread_index",)).tolist() == [False, True, False]


def test_category_stats_count_overlapping_kinds():
    s1 = sample("a", [0.2, 0.4, 0.6, 0.8], [K, KT, N, KT])
    s2 = sample("b", [1.0, 0.0], [frozenset({"sync"}), KT])
    stats = category_stats([s1, s2], ("kernel_body", "thread_index", "sync", "atomic"), threshold=0.5)
    assert stats["kernel_body"]["n"] == 4 and stats["kernel_body"]["mean"] == pytest.approx((0.2 + 0.4 + 0.8 + 0.0) / 4)
    assert stats["thread_index"]["n"] == 3 and stats["thread_index"]["mean"] == pytest.approx(0.4)
    assert stats["thread_index"]["share_below_threshold"] == pytest.approx(2 / 3)
    assert stats["sync"] == describe([1.0], 0.5)
    assert stats["atomic"] == {"n": 0}


def test_reference_fit_hand_example():
    # tokens at p <= tau = 0.1: 0.1 (neutral, exactly at tau: dropped by p > tau) and 1e-4 (sensitive)
    s1 = sample("a", [0.5, 0.1, 1e-4], [N, N, K])
    s2 = sample("b", [1.0, 0.25], [K, K])
    fit = reference_fit([s1, s2], threshold=0.1, sensitive_kinds=SENS, unreachable=1e-3)
    assert fit["n_samples"] == 2 and fit["n_tokens"] == 5
    assert fit["nll"] == pytest.approx(-(np.log(0.5) + np.log(0.1) + np.log(1e-4) + 0 + np.log(0.25)) / 5)
    assert fit["share_low"] == pytest.approx(2 / 5)
    assert fit["share_low_sensitive"] == pytest.approx(1 / 3) and fit["share_low_neutral"] == pytest.approx(1 / 2)
    assert fit["median_p_low"] == pytest.approx((0.1 + 1e-4) / 2)
    assert fit["share_samples_unreachable"] == pytest.approx(1 / 2)  # only "a" holds a token below 1e-3
    confident = reference_fit([s2], threshold=0.1, sensitive_kinds=SENS)
    assert confident["share_low"] == 0.0 and confident["median_p_low"] is None
    assert confident["share_low_neutral"] is None  # no neutral token: no share, not 0/0
    assert reference_fit([], threshold=0.1, sensitive_kinds=SENS) == {"n_samples": 0, "n_tokens": 0}


def test_low_window_statistics_hand_example():
    # threshold 0.5, window 2 (full windows, stride 1)
    a = sample("A", [0.9, 0.9, 0.2, 0.2, 0.9], [N, N, K, K, N])  # windows .9 .55 .2 .55 -> one low, sensitive
    b = sample("B", [0.1, 0.1, 0.9], [N, N, N])                  # windows .1 .5 -> one low (0.5 is not < 0.5)
    c = sample("C", [0.8, 0.9], [K, N])                          # one window .85
    per = [sample_windows(s, 0.5, 2, "full", SENS) for s in (a, b, c)]
    assert [sw.n_low for sw in per] == [1, 1, 0]
    assert per[0].sensitive_count.tolist() == [0, 1, 2, 1]
    st = low_window_stats(per)
    assert st["n_samples"] == 3 and st["n_samples_with_low_window"] == 2
    assert st["share_samples_with_low_window"] == pytest.approx(2 / 3)
    assert (st["n_windows"], st["n_low_windows"], st["n_low_windows_overlapping_sensitive"]) == (7, 2, 1)
    assert st["share_low_windows_overlapping_sensitive"] == pytest.approx(0.5)
    assert st["share_windows_overlapping_sensitive"] == pytest.approx(4 / 7)
    assert st["share_low_windows_majority_sensitive"] == pytest.approx(0.5)
    assert (st["n_low_regions"], st["n_low_regions_overlapping_sensitive"]) == (2, 1)


def test_low_window_statistics_without_low_windows_report_none_not_zero_division():
    per = [sample_windows(sample("x", [0.9, 0.9, 0.9], [K, N, N]), 0.5, 2, "full", SENS)]
    st = low_window_stats(per)
    assert st["n_low_windows"] == 0 and st["share_low_windows_overlapping_sensitive"] is None
    assert st["share_samples_with_low_window"] == 0.0


def test_runs_of_low_windows_are_regions():
    s = sample("r", [0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.1, 0.1], [N] * 8)
    sw = sample_windows(s, 0.5, 2, "full", SENS)
    assert sw.low.tolist() == [True, True, False, False, False, False, True]
    assert sw.low_regions == [(0, 2), (6, 7)]


def test_reflected_kde_is_a_density_on_the_unit_interval():
    rng = np.random.default_rng(0)
    values = rng.beta(8, 1, 3000)  # mass piled up against 1.0
    grid = np.linspace(0, 1, 2001)
    dens = reflected_kde(values, grid)
    assert (dens >= 0).all()
    assert np.trapezoid(dens, grid) == pytest.approx(1.0, abs=0.01)
    assert dens[-1] > dens[len(grid) // 2]  # no artificial dip at the bound


def test_reflected_kde_rejects_degenerate_input():
    with pytest.raises(ValueError, match="2 distinct"):
        reflected_kde([0.5, 0.5, 0.5], [0.5])


def test_scored_sample_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="3 confidences but 2 kind sets"):
        ScoredSample("bad", np.zeros(3), (N, N))
    with pytest.raises(ValueError, match="2 tokens"):
        ScoredSample("bad", np.zeros(3), (N, N, N), ("a", "b"))

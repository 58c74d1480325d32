"""Sliding windows over confidences: bounds and means against hand computations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuset.analysis.windows import true_runs, window_bounds, window_counts, window_means

CONF = [0.9, 0.1, 0.5, 0.3, 0.7]


def test_full_windows_stride_one_match_hand_means():
    w = window_means(CONF, 2, "full")
    assert w.starts.tolist() == [0, 1, 2, 3]
    assert w.ends.tolist() == [2, 3, 4, 5]
    np.testing.assert_allclose(w.means, [0.5, 0.3, 0.4, 0.5])
    w3 = window_means(CONF, 3, "full")
    np.testing.assert_allclose(w3.means, [0.5, 0.3, 0.5])


@pytest.mark.parametrize("window", [5, 7, 64])
def test_full_window_at_least_the_sample_is_one_window_over_everything(window):
    w = window_means(CONF, window, "full")
    assert (w.starts.tolist(), w.ends.tolist()) == ([0], [5])
    np.testing.assert_allclose(w.means, [0.5])


def test_centered_windows_follow_paper_eq5():
    # l = 2: floor(l/2) = 1 before, ceil(l/2) - 1 = 0 after (1-based t in the paper).
    w = window_means(CONF, 2, "centered")
    assert list(zip(w.starts.tolist(), w.ends.tolist())) == [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5)]
    np.testing.assert_allclose(w.means, [0.9, 0.5, 0.3, 0.4, 0.5])
    # l = 3: one before, one after, clipped at both ends.
    w = window_means(CONF, 3, "centered")
    assert list(zip(w.starts.tolist(), w.ends.tolist())) == [(0, 2), (0, 3), (1, 4), (2, 5), (3, 5)]
    np.testing.assert_allclose(w.means, [0.5, 0.5, 0.3, 0.5, 0.5])


def test_centered_window_longer_than_sample_covers_it_all():
    # The paper: "if T_n < l, it covers the entire sequence" (plain clipping would not).
    starts, ends = window_bounds(5, 8, "centered")
    assert starts.tolist() == [0] * 5 and ends.tolist() == [5] * 5


def test_empty_sample_has_no_windows():
    w = window_means([], 4)
    assert len(w) == 0


@pytest.mark.parametrize("window,mode,message", [(0, "full", "window must be >= 1"), (3, "sideways", "window mode")])
def test_bad_window_arguments_raise(window, mode, message):
    with pytest.raises(ValueError, match=message):
        window_means(CONF, window, mode)


def test_two_dimensional_confidences_rejected():
    with pytest.raises(ValueError, match="1-D"):
        window_means([[0.1, 0.2]], 2)


def test_window_counts_and_runs():
    w = window_means(CONF, 2, "full")
    assert window_counts([0, 1, 1, 0, 0], w).tolist() == [1, 2, 1, 0]
    assert true_runs([True, True, False, True, False, False, True]) == [(0, 2), (3, 4), (6, 7)]
    assert true_runs([]) == [] and true_runs([False, False]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40), st.integers(1, 12), st.sampled_from(["full", "centered"]))
def test_prefix_sum_means_equal_a_plain_loop(values, window, mode):
    w = window_means(values, window, mode)
    for a, b, m in zip(w.starts, w.ends, w.means):
        assert b > a
        assert m == pytest.approx(float(np.mean(values[a:b])), abs=1e-9)
    if mode == "centered":
        assert len(w) == len(values)
        if len(values) >= window:
            assert all(b - a <= window for a, b in zip(w.starts, w.ends))
    else:
        assert len(w) == max(1, len(values) - window + 1)


@pytest.mark.parametrize("window", [1, 2, 3, 7, 64, 65, 256])
def test_the_training_windows_in_torch_and_the_analysis_windows_in_numpy_agree(window):
    """CuSeT's loss (torch, packed samples) and the confidence analysis (numpy, one sample)
    compute eq. 5-6 separately; they must give the same window means, per sample."""
    import torch

    from cuset.losses.segments import segment_runs, window_confidence

    rng = np.random.default_rng(window)
    lengths = [1, 2, 5, 63, 64, 65, 129, 300]
    samples = [rng.random(n) for n in lengths]
    segment = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    packed = torch.tensor(np.concatenate(samples), dtype=torch.float64)
    trained = window_confidence(packed, segment_runs(segment), window).numpy()
    offset = 0
    for conf in samples:
        analysed = window_means(conf, window, mode="centered").means
        np.testing.assert_allclose(trained[offset:offset + len(conf)], analysed, rtol=0, atol=1e-12)
        offset += len(conf)

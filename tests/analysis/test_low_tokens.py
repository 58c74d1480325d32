"""Which of a base's low tokens (p <= tau) are CUDA-sensitive, neutral and replaceable: counted by hand."""

import numpy as np
import pytest

from cuset.analysis.low_tokens import low_token_shares, touches


def test_a_token_touches_a_range_when_one_of_its_characters_is_in_it():
    tokens = [(0, 3), (3, 5), (5, 5), (5, 9), (9, 12)]
    # [4, 6): tokens 1 (char 4) and 3 (char 5); the empty token 2 never; [12, 14): none (token 4 ends at 12)
    assert touches(tokens, [(4, 6), (12, 14)]).tolist() == [False, True, False, True, False]
    assert touches(tokens, []).tolist() == [False] * 5
    assert touches([], [(0, 1)]).tolist() == []


def test_shares_of_the_low_tokens():
    p = np.array([0.05, 0.1, 0.2, 0.01, 0.9, 0.11])
    sensitive = np.array([True, False, False, False, True, False])
    replaceable = np.array([False, True, True, True, False, False])
    s = low_token_shares(p, sensitive, replaceable, tau=0.1)
    # low (p <= 0.1): tokens 0, 1, 3 -> one sensitive, two neutral, two replaceable; 2 of 3 replaceable tokens low
    assert (s["n_tokens"], s["n_low"], s["n_replaceable"]) == (6, 3, 3)
    assert s["share_low"] == pytest.approx(0.5)
    assert (s["low_sensitive"], s["low_neutral"], s["low_replaceable"]) == pytest.approx((1 / 3, 2 / 3, 2 / 3))
    assert s["replaceable_low"] == pytest.approx(2 / 3)
    none = low_token_shares(np.array([0.5]), np.array([False]), np.array([False]), tau=0.1)
    assert none["low_sensitive"] is None and none["replaceable_low"] is None
    with pytest.raises(ValueError, match="one of each per token"):
        low_token_shares(p, sensitive[:2], replaceable, tau=0.1)

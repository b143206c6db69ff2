"""The one text of a change with its interval (hpcval.history.judging.change)."""

import math

from hpcval.history.judging import Change


def test_text_with_interval_and_level():
    c = Change(-0.148, -0.160, -0.135, 0.95)
    assert c.text() == "-14.8 % [-16.0 .. -13.5] (95 %)"


def test_text_without_interval():
    assert Change(0.05).text() == "+5.00 %"
    assert not Change(0.05).has_interval


def test_from_log_is_exp_minus_one():
    c = Change.from_log(math.log(0.8), math.log(0.75), math.log(0.85), 0.9)
    assert math.isclose(c.change, -0.2)
    assert math.isclose(c.low, -0.25) and math.isclose(c.high, -0.15)


def test_from_detail_needs_both_bounds():
    assert Change.from_detail({"change": -0.1, "ci_low": -0.2}).low is None
    assert Change.from_detail({"change": None}) is None
    d = {"change": -0.1, "ci_low": -0.2, "ci_high": 0.0, "ci_level": 0.95}
    assert Change.from_detail(d).text() == "-10.0 % [-20.0 .. +0] (95 %)"

"""Profile files (DESIGN §9 `mkbsim run --profiles`): every parameter checked; files written before a parameter
existed stay usable with the behaviour the simulator had then."""

from __future__ import annotations

import re

import pytest

from mkbsim.errors import UserError
from mkbsim.simulator import get_profile, parse_profile


def test_a_profile_round_trips_through_its_toml() -> None:
    profile = get_profile("sim-gemini-3.7-flash")
    assert parse_profile(profile.to_toml(), "x.toml") == profile


def test_a_file_from_before_a_parameter_existed_gets_the_behaviour_of_then() -> None:
    text = get_profile("sim-glm-5.3").to_toml()
    older = re.sub(r"^(spread|inline_cuda) = .*\n", "", text, flags=re.MULTILINE)
    profile = parse_profile(older, "old.toml")
    assert (profile.spread, profile.inline_cuda) == (0.25, 0.0)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ((r"^quality = .*\n", ""), "missing or non-numeric implementation.quality"),
        ((r"^spread = .*$", "spread = 2.0"), "implementation.spread = 2.0 is outside [0.05, 0.8]"),
    ],
)
def test_a_profile_file_missing_a_parameter_or_out_of_range_is_refused(edit: tuple[str, str], message: str) -> None:
    text = re.sub(edit[0], edit[1], get_profile("sim-glm-5.3").to_toml(), flags=re.MULTILINE)
    with pytest.raises(UserError, match=re.escape(message)):
        parse_profile(text, "bad.toml")

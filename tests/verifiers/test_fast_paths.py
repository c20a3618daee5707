"""The plain-number reading of parse_quantities gives exactly what the general scan gives."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from numerical3d.verifiers import parsing as P

SPACE = st.sampled_from(["", " ", "  ", "\t", "\n"])
WORDS = st.sampled_from([*P._SIMPLE_WORDS, "M", "CM", "Meters", "in", "e5", "E2", "x", "times", "sq", "m^",
                         "mm2", "m3", "ft^3", "degrees2", "a", "one", "inchs"])
NUMBER = st.from_regex(r"[-+]?[0-9]{1,17}(\.[0-9]{0,16})?|\.[0-9]{1,3}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(SPACE, NUMBER, st.one_of(st.none(), st.tuples(SPACE, WORDS)), SPACE)
@example(" ", "1.5", ("", "m2"), "")
@example("", "12", ("", "m^2"), " ")
@example("", "-3.25", (" ", "INCHES"), "")
def test_simple_reading_matches_general_scan(lead, number, unit, trail):
    text = lead + number + ("" if unit is None else unit[0] + unit[1]) + trail
    assert P.parse_quantities(text) == P._scan_quantities(text)


def test_simple_table_reads_every_listed_word():
    assert set(P._SIMPLE_UNITS) == set(P._SIMPLE_WORDS)
    assert P._SIMPLE_UNITS["m^2"] == "m2" and P._SIMPLE_UNITS["inches"] == "in" and P._SIMPLE_UNITS["deg"] == "deg"

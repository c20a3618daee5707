"""The units a numeric answer may be in: one `Unit` per unit, everything the project asks of it.

A spec names its unit (`numeric_spec(answer, "cm")`); from the unit's entry here come how an answer
may write it (parsing), its dimension and factor to SI (grading across units), how a canonical answer
writes it (`answer_text`), how the prompt asks for it (`templates/prompt.j2`'s `unit_words`) and how a
multiple-choice option writes it. A new unit is one entry of `UNITS`.
"""

from __future__ import annotations

from dataclasses import dataclass

_MET = r"met(?:er|re)s?"
_SQ = r"(?:\^\s*2|²|\s*squared)"


@dataclass(frozen=True)
class Unit:
    """One unit of a numeric answer."""

    name: str  # as a spec names it ("m2"); "" is a dimensionless number
    dimension: str  # "length", "area", "angle" or "none": an answer converts only within one dimension
    factor: float  # one of it in SI (metres, square metres; 1 for angles and plain numbers)
    answer: str  # as a canonical answer writes it ("m^2")
    words: str  # as the prompt asks for it ("square meters")
    option: str  # as a multiple-choice option writes it
    pattern: str | None  # how an answer may write it (a regex, case-insensitive); None: never written


UNITS: dict[str, Unit] = {u.name: u for u in (
    Unit("m", "length", 1.0, "m", "meters", "m", rf"{_MET}|m"),
    Unit("cm", "length", 0.01, "cm", "centimeters", "cm", rf"centi{_MET}|cm"),
    Unit("mm", "length", 0.001, "mm", "millimeters", "mm", rf"milli{_MET}|mm"),
    Unit("km", "length", 1000.0, "km", "kilometers", "km", rf"kilo{_MET}|km"),
    Unit("ft", "length", 0.3048, "ft", "feet", "ft", r"feet|foot|ft|'"),
    Unit("in", "length", 0.0254, "inches", "inches", "in", r"inch(?:es)?|\""),
    Unit("m2", "area", 1.0, "m^2", "square meters", "square meters",
         rf"(?:square|sq\.?)\s*(?:{_MET}|m)|(?:{_MET}|m){_SQ}|m2|sqm"),
    Unit("cm2", "area", 1e-4, "cm^2", "square centimeters", "cm2",
         rf"(?:square|sq\.?)\s*(?:centi{_MET}|cm)|(?:centi{_MET}|cm){_SQ}|cm2"),
    Unit("ft2", "area", 0.09290304, "ft^2", "square feet", "ft2",
         rf"(?:square|sq\.?)\s*(?:feet|foot|ft)|(?:feet|foot|ft){_SQ}|ft2"),
    Unit("deg", "angle", 1.0, "degrees", "degrees", "deg", r"degrees?|deg|°"),
    Unit("", "none", 1.0, "", "", "", None),
)}

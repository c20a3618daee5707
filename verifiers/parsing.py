"""Answer extraction and parsing: from a raw completion to typed candidates.

Policy (documented in docs/verifiers.md):
- The answer text is the content of the last `<answer>...</answer>`. Fallback
  when there is none: the text after an unclosed last `<answer>`; otherwise the
  text after the last `</think>` (or the whole completion), narrowed to what
  follows the last "answer is" / "answer:" if present. Leftover tags are
  removed. Answer texts longer than MAX_ANSWER_CHARS are unparseable.
- Parsers return every candidate they find; the verifiers score an answer that
  names several different candidates as the worst of them, so listing every
  option never pays.
- NaN, inf and magnitudes above ABSURD are not numbers.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from .units import UNITS as UNIT_REGISTRY

__all__ = [
    "MAX_ANSWER_CHARS",
    "ABSURD",
    "UNITS",
    "extract_answer",
    "format_ok",
    "format_reward",
    "split_completion",
    "parse_numbers",
    "parse_quantities",
    "numeric_candidates",
    "replace_number_words",
    "find_terms",
    "direction_aliases",
    "find_phrases",
    "relation_aliases",
    "choice_candidates",
    "normalize_text",
]

MAX_ANSWER_CHARS = 1000
ABSURD = 1e6

_TAG_RE = re.compile(r"</?(?:answer|think)>")
_ANSWER_IS_RE = re.compile(r"answer\s*(?:is|:)", re.I)


def extract_answer(completion: str) -> str | None:
    """The answer text of a completion, or None when there is none (see module doc)."""
    if not isinstance(completion, str):
        return None
    end = completion.rfind("</answer>")
    start = completion.rfind("<answer>", 0, end) if end >= 0 else -1
    if start >= 0:
        text = completion[start + 8 : end]
    else:
        last_open = completion.rfind("<answer>")
        if last_open >= 0:
            text = completion[last_open + 8 :]
        else:
            think_end = completion.rfind("</think>")
            text = completion[think_end + 8 :] if think_end >= 0 else completion
            if len(text) > MAX_ANSWER_CHARS or "nswer" in text:
                tail = None
                for m in _ANSWER_IS_RE.finditer(text):
                    tail = m
                if tail is not None:
                    text = text[tail.end() :]
    if "<" in text:
        text = _TAG_RE.sub(" ", text)
    text = text.strip()
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None
    return text


# <think>X</think> <answer>Y</answer> with no tag inside X or Y (an unrolled, linear-time loop).
_NO_TAG = r"[^<]*(?:<(?!/?(?:think|answer)>)[^<]*)*"
_FORMAT_RE = re.compile(rf"\s*<think>{_NO_TAG}</think>\s*<answer>({_NO_TAG})</answer>\s*")


def format_ok(completion: str) -> bool:
    """True for `<think>...</think>` then `<answer>...</answer>` (after strip), one of each tag,
    nothing but whitespace between them and a non-blank answer."""
    return split_completion(completion)[0]


def split_completion(completion: str) -> tuple[bool, str | None]:
    """(format flag, answer text) in one pass; the well-formed case needs no fallback search."""
    if not isinstance(completion, str):
        return False, None
    m = _FORMAT_RE.fullmatch(completion)
    if m is not None:
        text = m.group(1).strip()
        if text:
            return True, text if len(text) <= MAX_ANSWER_CHARS else None
    return False, extract_answer(completion)


def format_reward(completion: str) -> float:
    """r_fmt in {0, 1}."""
    return 1.0 if format_ok(completion) else 0.0


def normalize_text(text: str) -> str:
    """Lower case, `-`/`_` to spaces, collapsed whitespace; used to compare labels."""
    return " ".join(text.lower().replace("-", " ").replace("_", " ").split())


# ---------------------------------------------------------------- number words
_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}
_SCALES = {"dozen": 12, "hundred": 100, "thousand": 1000}
_NUMWORD = "|".join(sorted([*_SMALL, *_TENS, *_SCALES], key=len, reverse=True))
_WORDNUM_RE = re.compile(
    rf"\b(?:(?:a|an)[\s-]+)?(?:{_NUMWORD})(?:[\s-]+(?:and[\s-]+)?(?:{_NUMWORD}))*\b", re.I
)
_WORD_SPLIT_RE = re.compile(r"[\s-]+")
_ALPHA_RE = re.compile(r"[a-z]+")
_NUMWORDS = frozenset([*_SMALL, *_TENS, *_SCALES])


def _words_value(phrase: str) -> list[int]:
    """Values of a run of number words; a run like "one two" is two numbers."""
    out: list[int] = []
    total, cur, started = 0, 0, False
    for tok in _WORD_SPLIT_RE.split(phrase.lower()):
        if tok in ("a", "an", "and", ""):
            continue
        if tok in _SMALL or tok in _TENS:
            val = _SMALL.get(tok, _TENS.get(tok, 0))
            low = cur % 100
            clash = started and (
                (tok in _TENS and low != 0) or (tok in _SMALL and (low % 10 != 0 or 10 <= low < 20 or (low and val >= 10)))
            )
            if clash:
                out.append(total + cur)
                total, cur = 0, 0
            cur += val
        elif tok == "dozen":
            cur = max(cur, 1) * 12
        elif tok == "hundred":
            cur = max(cur, 1) * 100
        else:  # thousand
            total += max(cur, 1) * 1000
            cur = 0
        started = True
    out.append(total + cur)
    return out


def replace_number_words(text: str) -> str:
    """Spell-out numbers as digits: "three" -> "3", "a dozen" -> "12", "twenty-five" -> "25"."""
    if _NUMWORDS.isdisjoint(_ALPHA_RE.findall(text.lower())):  # cheap pre-filter
        return text
    return _WORDNUM_RE.sub(lambda m: " , ".join(str(v) for v in _words_value(m.group(0))), text)


# ---------------------------------------------------------------------- units
# canonical unit -> (dimension, factor to SI: metres or square metres), from the unit registry
UNITS: dict[str, tuple[str, float]] = {u.name: (u.dimension, u.factor) for u in UNIT_REGISTRY.values()}
# Areas are tried first: "m squared" must not be read as "m" followed by a word.
_UNIT_PATTERNS: list[tuple[str, str]] = [(u.name, u.pattern) for u in sorted(UNIT_REGISTRY.values(),
                                                                           key=lambda u: u.dimension != "area")
                                         if u.pattern is not None]
_UNIT_RE = re.compile(
    r"\s*(?:" + "|".join(f"(?P<u_{name}>{pat})" for name, pat in _UNIT_PATTERNS) + r")(?![a-z0-9²])",
    re.I,
)
_NUM_RE = re.compile(r"(?<![\w.])([-+\u2212]?)(\d+(?:[.,]\d+)*|\.\d+)(?:[eE]([-+]?\d{1,4}))?(?![\w.]*\d)")


def _number_value(sign: str, body: str, exp: str | None) -> float | None:
    if "," in body:
        if "." in body:
            head, _, frac = body.partition(".")
            groups = head.split(",")
            if "." in frac or any(len(g) != 3 for g in groups[1:]):
                return None
            body = head.replace(",", "") + "." + frac
        else:
            groups = body.split(",")
            if all(len(g) == 3 for g in groups[1:]):
                body = "".join(groups)
            elif len(groups) == 2:
                body = groups[0] + "." + groups[1]  # decimal comma: "1,5"
            else:
                return None
    elif body.count(".") > 1:
        return None
    try:
        val = float(body + ("e" + exp if exp else ""))
    except ValueError:
        return None
    return -val if sign in ("-", "\u2212") else val


def parse_quantities(text: str) -> list[tuple[float, str | None]]:
    """Every number in the text with the unit written after it (canonical name) or None."""
    simple = _SIMPLE_RE.fullmatch(text) if text.isascii() else None
    if simple is not None:  # the commonest answer, "12.5 m" or "3", read without the general scan
        sign, body, sep, word = simple.groups()
        if word is None:
            return [(_number_value(sign, body, None), None)]  # type: ignore[list-item]
        unit = _SIMPLE_UNITS.get(word.lower())
        if unit is not None and (sep or "2" not in word):  # "1.5m2" is not a number to the general scan
            return [(_number_value(sign, body, None), unit)]  # type: ignore[list-item]
    return _scan_quantities(text)


def _scan_quantities(text: str) -> list[tuple[float, str | None]]:
    """parse_quantities' general scan: number words, separators, exponents, units anywhere."""
    text = replace_number_words(text)
    out: list[tuple[float, str | None]] = []
    consumed = 0  # end of the last unit, so the "2" of "m^2" is not a number
    for m in _NUM_RE.finditer(text):
        if m.start() < consumed:
            continue
        val = _number_value(m.group(1), m.group(2), m.group(3))
        if val is None:
            continue
        um = _UNIT_RE.match(text, m.end())
        unit = None
        if um is not None:
            unit = um.lastgroup[2:]  # type: ignore[index]
            consumed = um.end()
        out.append((val, unit))
    return out


# One plain number and at most one unit word. A word is read here only as the unit the general scan
# reads it as (checked when the table is built), so both paths give the same quantities.
_SIMPLE_RE = re.compile(r"\s*([-+]?)([0-9]{1,15}(?:\.[0-9]{1,15})?)(?:(\s*)([A-Za-z][A-Za-z^]*2?))?\s*")
_SIMPLE_WORDS = ("m", "cm", "mm", "km", "ft", "feet", "foot", "inch", "inches", "m2", "m^2", "cm2", "cm^2", "ft2",
                 "ft^2", "sqm", "deg", "degree", "degrees", "meter", "meters", "metre", "metres", "centimeter",
                 "centimeters", "centimetre", "centimetres", "millimeter", "millimeters", "kilometer", "kilometers")


def _simple_units() -> dict[str, str]:
    table = {}
    for word in _SIMPLE_WORDS:
        spaced, joined = _scan_quantities(f"1 {word}"), _scan_quantities(f"1{word}")
        if len(spaced) == 1 and spaced[0][1] is not None and ("2" in word or joined == spaced):
            table[word] = spaced[0][1]
    return table


_SIMPLE_UNITS = _simple_units()


_PLAIN = r"[-+]?\d{1,15}(?:\.\d{1,15})?"
_TUPLE_RE = re.compile(rf"\s*[\[(]?\s*{_PLAIN}(?:(?:\s+,|,\s)\s*{_PLAIN})*\s*[\])]?\s*\.?\s*")
_PLAIN_RE = re.compile(_PLAIN)


def parse_numbers(text: str) -> list[float]:
    """Every finite, non-absurd number in the text (units ignored)."""
    if _TUPLE_RE.fullmatch(text):  # "(0.4, -1.2, 2.5)", "3": no words, no units
        return [v for v in map(float, _PLAIN_RE.findall(text)) if abs(v) <= ABSURD]
    return [v for v, _ in parse_quantities(text) if math.isfinite(v) and abs(v) <= ABSURD]


def numeric_candidates(text: str, unit: str) -> list[float]:
    """Numbers in the text expressed in `unit`; a bare number is read in `unit` (and in every unit of
    that dimension written elsewhere in the answer).

    A number whose written unit has another dimension (an area for a length)
    is dropped, as are NaN, inf and |x| > ABSURD (in `unit`).
    """
    dim, factor = UNITS[unit]
    quantities = parse_quantities(text)
    if len(quantities) == 1:  # the loop below for one quantity, without its bookkeeping
        val, written = quantities[0]
        u = unit if written is None else written
        udim, ufactor = UNITS[u]
        if udim != dim:
            return []
        x = val if u == unit else val * ufactor / factor
        return [x] if math.isfinite(x) and abs(x) <= ABSURD else []
    # A bare number beside numbers with units may be meant in any of them: each reading is a candidate.
    bare_units = [unit, *dict.fromkeys(u for _, u in quantities if u is not None and u != unit)]
    out: list[float] = []
    for val, written in quantities:
        for u in (bare_units if written is None else (written,)):
            udim, ufactor = UNITS[u]
            if udim != dim:
                continue
            x = val if u == unit else val * ufactor / factor
            if math.isfinite(x) and abs(x) <= ABSURD:
                out.append(x)
    return out


# ---------------------------------------------------------------- term finding
@lru_cache(maxsize=4096)
def _terms_regex(aliases: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    """One alternation over every alias pattern (longest first) -> key by group name."""
    items: list[tuple[int, str, str]] = []
    for i, (key, pats) in enumerate(aliases):
        for pat in pats:
            items.append((len(pat), key, pat))
    items.sort(key=lambda x: -x[0])
    groups: dict[str, str] = {}
    parts = []
    for j, (_, key, pat) in enumerate(items):
        groups[f"g{j}"] = key
        parts.append(f"(?P<g{j}>{pat})")
    return re.compile(r"(?<![\w])(?:" + "|".join(parts) + r")(?![\w])", re.I), groups


_NEGATION_RE = re.compile(r"\b(?:not|no|never|isn't|aren't|isnt|arent)\s+(?:\w+\s+){0,2}$", re.I)


def find_terms(
    text: str, aliases: tuple[tuple[str, tuple[str, ...]], ...], skip_negated: bool = False
) -> list[tuple[int, str]]:
    """(position, key) of each non-overlapping alias match, leftmost-longest."""
    rx, groups = _terms_regex(aliases)
    out = []
    for m in rx.finditer(text):
        if skip_negated and _NEGATION_RE.search(text, max(0, m.start() - 30), m.start()):
            continue
        out.append((m.start(), groups[m.lastgroup]))  # type: ignore[index]
    return out


def _flex(words: list[str]) -> str:
    """Regex for a phrase whose words may be joined by spaces, `-` or `_`."""
    return r"[\s_-]*".join(re.escape(w) for w in words)


def find_phrases(text: str, phrases: tuple[str, ...], plural: bool = False) -> list[tuple[int, str]]:
    """(position, phrase) of whole-word mentions, compared after `normalize_text`,
    longest phrase first and without overlaps; with `plural`, "chairs" names "chair".

    Plain string search, so per-item phrase sets (labels, option texts) cost no
    regex compilation.
    """
    hay = " " + normalize_text(text) + " "
    taken: list[tuple[int, int]] = []
    hits: list[tuple[int, str]] = []
    for phrase, needle in _needles(phrases):
        start = hay.find(needle)
        while start >= 0:
            end = start + len(needle)
            if plural and hay.startswith("es", end) and not hay[end + 2].isalnum():
                end += 2
            elif plural and hay[end] == "s" and not hay[end + 1].isalnum():
                end += 1
            if not hay[start - 1].isalnum() and not hay[end].isalnum() and all(
                end <= a or start >= b for a, b in taken
            ):
                taken.append((start, end))
                hits.append((start, phrase))
            start = hay.find(needle, start + 1)
    hits.sort()
    return hits


@lru_cache(maxsize=4096)
def _needles(phrases: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(phrase, normalised phrase), longest first, blanks left out: an item's labels are searched
    in every one of its completions."""
    ordered = sorted(phrases, key=lambda p: -len(normalize_text(p)))
    return tuple((p, normalize_text(p)) for p in ordered if normalize_text(p))


_DIR_SYNONYMS = {
    "front": r"(?:in\s+)?front|ahead|forward",
    "back": r"back|behind|rear|backward",
    "left": r"left",
    "right": r"right",
}


def _dir_word(w: str) -> str:
    return f"(?:{_DIR_SYNONYMS[w]})" if w in _DIR_SYNONYMS else re.escape(w)


@lru_cache(maxsize=4096)
def direction_aliases(classes: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Direction classes: synonyms (behind = back, ahead = front) and either word order
    for two-word classes ("front-left" = "left front")."""
    out = []
    for c in classes:
        words = normalize_text(c).split() or [c]
        sep = r"[\s_-]*"
        pats = [sep.join(_dir_word(w) for w in words)]
        if len(words) == 2:
            pats.append(sep.join(_dir_word(w) for w in reversed(words)))
        out.append((c, tuple(pats)))
    return tuple(out)


_REL_SYNONYMS = {
    "left of": [r"(?:to\s+the\s+)?left(?:\s+of)?", r"left[\s_-]*of"],
    "right of": [r"(?:to\s+the\s+)?right(?:\s+of)?", r"right[\s_-]*of"],
    "above": [r"above", r"on\s+top\s+of", r"over"],
    "below": [r"below", r"under(?:neath)?", r"beneath"],
    "in front of": [r"in[\s_-]*front(?:[\s_-]*of)?"],
    "behind": [r"behind", r"in\s+back\s+of"],
    "near": [r"near(?:by)?", r"next\s+to", r"close\s+to", r"beside", r"adjacent(?:\s+to)?"],
}


@lru_cache(maxsize=4096)
def relation_aliases(vocabulary: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Relation names with common English synonyms for the standard ones."""
    out = []
    for rel in vocabulary:
        norm = normalize_text(rel)
        pats = [_flex(norm.split() or [rel])]
        pats += _REL_SYNONYMS.get(norm, [])
        out.append((rel, tuple(pats)))
    return tuple(out)


# --------------------------------------------------------------------- choice
_LEAD_LETTER_RE = re.compile(r"^\W*(?:option\s+|choice\s+)?\(?([A-Z])\)?(?:[.):,]|\s|$)", re.I)
_UPPER_LETTER_RE = re.compile(r"(?<![\w'])([A-Z])(?![\w'])")


@lru_cache(maxsize=4096)
def _normalized_options(options: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(normalize_text(o).strip(" .") for o in options)


def choice_candidates(text: str, options: tuple[str, ...]) -> list[str]:
    """Letters the answer names: a leading letter ("B", "(B)", "B. chair", "option b"),
    other stand-alone capital option letters, and option texts written out."""
    letters = [chr(ord("A") + i) for i in range(len(options))]
    norm_opts = _normalized_options(options)
    norm = normalize_text(text).strip(" .!")
    if norm in norm_opts:
        return [letters[norm_opts.index(norm)]]
    if len(norm) == 1 and norm.upper() in letters:
        return [norm.upper()]
    found: list[str] = []
    rest = text
    m = _LEAD_LETTER_RE.match(text)
    if m and m.group(1).upper() in letters and (m.group(1).isupper() or m.group(0).strip().lower() != "a"):
        lead = m.group(1).upper()
        rest = text[m.end() :]
        rest_norm = normalize_text(rest).strip(" .")
        for letter, opt in zip(letters, norm_opts):
            if rest_norm == opt:
                # "B. table" names B; "A table" with table = B reads "A" as an article
                article = lead == "A" and m.group(0).rstrip().endswith("A") and m.group(0)[-1].isspace()
                return [letter] if (letter == lead or article) else [lead, letter]
        found.append(lead)
    found += [c for c in _UPPER_LETTER_RE.findall(rest) if c in letters]
    found += [letters[options.index(o)] for _, o in find_phrases(rest, options)]
    return list(dict.fromkeys(found))

"""A fixed corpus of completions (every verifier kind, junk included) must keep exactly its rewards.

The expected results in data/reward_corpus.json were computed by the verifiers before their
hot path was optimised; any change of parsing or scoring shows up here as a changed row.
Regenerate (only for an intended change of results, and say why in the commit):

    python3 tests/verifiers/test_reward_corpus.py
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

from numerical3d import verifiers as V

FIXTURE = Path(__file__).parent / "data" / "reward_corpus.json"
N_SPECS = 300
PER_SPEC = 8

DIRS8 = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
DIRS4 = ["front", "right", "back", "left"]
WORDS = ["chair", "table", "sofa", "lamp", "bed", "tv", "desk", "door", "window", "sink", "coffee table",
         "night_stand", "Shelf"]
NUMBER_WORDS = ["zero", "one", "two", "three", "a dozen", "twenty-five", "one hundred and five", "seven"]
UNIT_TEXTS = {"m": ["m", "meters", "metre", "cm", "mm", "ft", "'", "m^2", "km", ""],
              "cm": ["cm", "centimeters", "m", "mm", "in", "inches", "\"", "cm2", ""],
              "m2": ["m^2", "m2", "square meters", "sq m", "sqm", "ft2", "square feet", "m", "cm^2", ""],
              "ft": ["ft", "feet", "'", "in", "m", ""], "in": ["in", "inches", "\"", "cm", ""],
              "": ["", "m", "times", "x"], "deg": ["degrees", "deg", "°", ""]}
JUNK = ["", " ", "<answer></answer>", "<think></think>", "<answer>", "</answer>", "answer:", "nan", "inf",
        "-inf", "1e400", "1,2,3", "1,234.5", "1.2.3", "--5", "\u22123.5", "½", "NaN m", "I am not sure",
        "none", "no relations", "A or B", "option b", "(C)", "a", "A table", "left, right, front, back",
        "x" * 1200, "<think>" * 3, "</think></think>answer is 4", "3 m or 4 m", "between 2 and 3 metres",
        "twenty one", "1e6", "1000001", "0.000", "-0", "+7", ".5", "5.", "3 m^2", "2²", "4 squared meters"]
THINKS = ["", "<think>short</think>", "<think>The chair is about 2 m from the 3 lamps.</think>",
          "<think>measure <b>carefully</b></think>", "<think>unclosed"]


def _num(rng: random.Random, y: float) -> str:
    x = y * math.exp(rng.gauss(0.0, 0.4))
    return rng.choice([f"{x:.2f}", f"{x:.1f}", f"{x:.0f}", f"{x:.3g}", f"{-x:.2f}", f"{x:,.2f}",
                       f"{x:.2e}", str(round(x))])


def _spec(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["numeric", "numeric", "count", "choice", "direction", "direction_angle", "order",
                       "order_pairwise", "relations", "relations_graph", "grounding", "gamma"])
    if kind == "numeric":
        unit = rng.choice(["m", "cm", "m2", "ft", "in", "", "deg", "mm", "km", "cm2", "ft2"])
        if unit == "deg":
            return V.numeric_spec(round(rng.uniform(-180, 360), 1), "deg", error="angular")
        y = round(rng.uniform(0.1, 40.0), rng.choice([0, 1, 2]))
        if rng.random() < 0.3:
            return V.numeric_spec(y, unit, error="squared", scale=rng.choice([0.1, 1.0, 2.5]))
        return V.numeric_spec(y, unit)
    if kind == "count":
        return V.count_spec(rng.randrange(0, 30), **rng.choice([{}, {"form": "linear", "c": 2.0}, {"tau": 3.0}]))
    if kind == "choice":
        opts = rng.sample(WORDS, rng.choice([2, 4, 5]))
        return V.choice_spec("ABCDE"[rng.randrange(len(opts))], opts)
    if kind == "direction":
        classes = rng.choice([DIRS8, DIRS4, ["left", "back", "right"]])
        return V.direction_spec(rng.choice(classes), classes)
    if kind == "direction_angle":
        classes = rng.choice([DIRS8, DIRS4])
        angle = rng.uniform(0, 360)
        centre = min(range(len(classes)), key=lambda i: min(abs(angle - 360 * i / len(classes)),
                                                             360 - abs(angle - 360 * i / len(classes))))
        return V.direction_spec(classes[centre], classes, angle=round(angle, 1))
    if kind == "order":
        return V.order_spec(rng.sample(WORDS, rng.choice([2, 3, 4])))
    if kind == "order_pairwise":
        labels = rng.sample(WORDS, 3)
        times = sorted(round(rng.uniform(0, 10), 1) for _ in labels)
        return V.order_spec(labels, form="pairwise", times=times, beta=2.0)
    if kind == "relations":
        return V.relations_spec(rng.sample(list(V.spec.DEFAULT_RELATIONS), rng.choice([0, 1, 2, 3])))
    if kind == "relations_graph":
        return V.relations_spec([rng.choice(list(V.spec.DEFAULT_RELATIONS))], form="graph")
    if kind == "grounding":
        return V.grounding_spec([round(rng.uniform(-3, 3), 2) for _ in range(rng.choice([2, 3]))])
    return V.count_spec(rng.randrange(1, 9), gamma=2.0)


def _answer(rng: random.Random, s: dict[str, Any]) -> str:
    kind = s["kind"]
    if kind == "numeric":
        unit = s["unit"]
        parts = [f"{_num(rng, s['answer'])} {rng.choice(UNIT_TEXTS.get(unit, ['']))}".strip()
                 for _ in range(rng.choice([1, 1, 1, 2]))]
        return rng.choice([" or ".join(parts), "about " + parts[0], parts[0] + " roughly", rng.choice(NUMBER_WORDS)])
    if kind == "count":
        n = max(0, s["answer"] + rng.randrange(-3, 4))
        return rng.choice([str(n), f"{n} chairs", rng.choice(NUMBER_WORDS), f"{n} or {n + 1}", f"There are {n}."])
    if kind == "choice":
        letters = "ABCDE"[: len(s["options"])]
        return rng.choice([rng.choice(letters), f"({rng.choice(letters)})", f"{rng.choice(letters)}. "
                           f"{rng.choice(s['options'])}", rng.choice(s["options"]), f"option {rng.choice(letters).lower()}",
                           f"{rng.choice(letters)} or {rng.choice(letters)}", f"the {rng.choice(s['options'])}s"])
    if kind == "direction":
        c = rng.choice(s["classes"])
        extra = [c, c.replace("-", " "), f"to the {c}", "behind", "ahead", "left front", f"{c} or {rng.choice(s['classes'])}"]
        if "angle" in s:
            a = s["angle"] + rng.gauss(0, 40)
            extra += [f"{a:.0f} degrees", f"{c} ({a:.0f} degrees)", f"between {a - 20:.0f} and {a + 20:.0f} degrees",
                      f"{a:.0f}°", f"{a:.0f}"]
        return rng.choice(extra)
    if kind == "order":
        labels = list(s["answer"])
        rng.shuffle(labels)
        sep = rng.choice([", ", " then ", " -> ", " and "])
        text = sep.join(labels)
        return rng.choice([text, text + " or " + ", ".join(reversed(labels)), text.upper(), labels[0] + "s first"])
    if kind == "relations":
        rels = rng.sample(list(V.spec.DEFAULT_RELATIONS), rng.choice([0, 1, 2]))
        words = [rng.choice([r, r.replace("-", " "), "next to", "under", "on top of", "to the left of"]) for r in rels]
        return rng.choice([", ".join(words) or "none", " or ".join(words) or "nothing", "not " + ", ".join(words),
                           "it is " + " and ".join(words)])
    xs = [c + rng.gauss(0, 0.4) for c in s["answer"]]
    body = ", ".join(f"{x:.2f}" for x in xs)
    return rng.choice([f"({body})", f"[{body}]", body, f"x={xs[0]:.2f}", f"({body}) or ({body})", f"({body}) m"])


def _completion(rng: random.Random, s: dict[str, Any]) -> Any:
    u = rng.random()
    answer = _answer(rng, s)
    if u < 0.55:
        return f"{rng.choice(THINKS[1:3])}<answer>{answer}</answer>"
    if u < 0.65:
        return f"{rng.choice(THINKS)} The answer is {answer}"
    if u < 0.72:
        return f"{rng.choice(THINKS)}<answer>{answer}"
    if u < 0.77:
        return [{"role": "assistant", "content": f"<think>x</think><answer>{answer}</answer>"}]
    if u < 0.79:
        return [{"role": "assistant", "content": [{"type": "text", "text": f"<answer>{answer}</answer>"}]}]
    if u < 0.81:
        return f"<answer>{answer}</answer>".encode()
    if u < 0.83:
        return rng.choice([None, 3.5, [], {"content": answer}])
    junk = rng.choice(JUNK)
    return rng.choice([junk, f"<think>j</think><answer>{junk}</answer>", f"{answer} {junk}",
                       f"<think>{junk}</think><answer>{answer}</answer>  ", f"<answer>{answer}</answer><answer>{junk}</answer>"])


def corpus(seed: int = 25) -> tuple[list[dict[str, Any]], list[Any], list[float]]:
    """Specs, completions and per-row k; each spec object is shared by PER_SPEC rows, as in GRPO."""
    rng = random.Random(seed)
    specs, comps, ks = [], [], []
    for _ in range(N_SPECS):
        s = _spec(rng)
        for _ in range(PER_SPEC):
            specs.append(s)
            comps.append(_completion(rng, s))
            ks.append(rng.choice([0.5, 5.0, 50.0, 100.0]))
    return specs, comps, ks


FIELDS = ("kind", "parsed", "error", "score", "format_ok", "accuracy_reward", "reward", "ambiguous")


def _results(specs: list[dict[str, Any]], comps: list[Any], ks: list[float]) -> list[list[Any]]:
    """Per row: every VerifyResult field (FIELDS order), then the reward under another operator,
    Phi calibration and format weight, then (every 50th row) the one-item verify's result."""
    batch = V.verify_batch(specs, comps, ks)
    phi_cfg = V.PhiConfig(eps_r=0.05, kmax=50.0)
    tanh = V.verify_batch(specs, comps, 7.0, operator="tanh", phi_config=phi_cfg, format_weight=0.3)
    rows = []
    for i, (r, t) in enumerate(zip(batch, tanh)):
        row = [getattr(r, f) for f in FIELDS] + [t.reward]
        if i % 50 == 0:
            one = V.verify(specs[i], comps[i], ks[i])
            row.append([getattr(one, f) for f in FIELDS])
        rows.append(row)
    return rows


def _inputs_digest(specs: list[dict[str, Any]], comps: list[Any], ks: list[float]) -> str:
    return hashlib.sha256(json.dumps([specs, [repr(c) for c in comps], ks]).encode()).hexdigest()


def _canon(x: Any) -> Any:
    """JSON's view of a value (tuples as lists), so stored and computed results compare exactly."""
    return json.loads(json.dumps(x))


def test_corpus_inputs_are_the_stored_ones():
    assert _inputs_digest(*corpus()) == json.loads(FIXTURE.read_text())["inputs_sha256"]


# Floats are compared within this relative tolerance: numpy's exp/tanh may differ in the last bit
# between builds of the library (a fresh install resolved another numpy and 49 of 2,000 rewards
# moved by one ulp), while any change of a verifier moves rewards by far more.
REL_TOL = 1e-12


def _close(got: Any, stored: Any) -> bool:
    """Equal, floats within REL_TOL (ints, strings, bools and None exactly), recursively."""
    if isinstance(got, float) and isinstance(stored, float):
        return math.isclose(got, stored, rel_tol=REL_TOL, abs_tol=1e-300)
    if isinstance(got, list) and isinstance(stored, list):
        return len(got) == len(stored) and all(_close(g, s) for g, s in zip(got, stored))
    return type(got) is type(stored) and got == stored


def test_close_tells_a_changed_reward_from_a_last_bit():
    assert _close([0.45474464389254005, "numeric", None], [0.4547446438925401, "numeric", None])
    assert not _close([0.4547], [0.4548]) and not _close([1], [1.0]) and not _close([True], [1])


def test_corpus_rewards_unchanged():
    specs, comps, ks = corpus()
    stored = json.loads(FIXTURE.read_text())["results"]
    got = _canon(_results(specs, comps, ks))
    assert len(got) == len(stored) == N_SPECS * PER_SPEC
    diff = [(i, comps[i], g, s) for i, (g, s) in enumerate(zip(got, stored)) if not _close(g, s)]
    assert not diff, f"{len(diff)} rows changed, first: {diff[0]}"


def test_corpus_covers_every_kind_and_junk():
    stored = json.loads(FIXTURE.read_text())["results"]
    col = {f: [r[i] for r in stored] for i, f in enumerate(FIELDS)}
    assert set(col["kind"]) == set(V.spec.KINDS)
    assert None in col["parsed"] and any(col["ambiguous"]) and any(col["format_ok"]) and not all(col["format_ok"])


if __name__ == "__main__":
    specs_, comps_, ks_ = corpus()
    FIXTURE.parent.mkdir(exist_ok=True)
    rows_ = _results(specs_, comps_, ks_)
    FIXTURE.write_text(json.dumps({"inputs_sha256": _inputs_digest(specs_, comps_, ks_), "fields": FIELDS,
                                   "results": rows_}, separators=(",", ":")).replace("],[", "],\n[") + "\n")
    print(f"wrote {FIXTURE} ({len(comps_)} rows)", file=sys.stderr)

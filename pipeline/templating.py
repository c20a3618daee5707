"""Question templates: jinja2 files under `templates/`, one per subtask, each with numbered
`paraphrase_N` blocks, plus the prompt wrapper (`prompt.j2`) and the multiple-choice rendering
(`multiple_choice.j2`).

Undefined variables are errors (StrictUndefined) so that a template typo fails loudly instead of
emitting a question with a hole in it. A user's own template folder overrides ours file by file;
because its contents are not ours, everything then renders in jinja2's sandbox.

Rendering is precompiled: a template's syntax tree tells which variables it only prints (or joins,
loops over and prints, tests for emptiness, counts). Those are "opaque": the template renders once
per shape of the context into a skeleton with numbered slots, and later renders fill the slots
without running jinja2 at all (item generation renders two templates per item; jinja2 costs tens of
microseconds a render, a skeleton fill about one). Every other variable is part of the skeleton's
key. The first render of each skeleton is compared against jinja2's own output.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

import jinja2
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

LETTERS = "ABCDEFGHIJ"
_PARAPHRASE = re.compile(r"^paraphrase_(\d+)$")

_IRREGULAR = {"person": "people", "shelf": "shelves", "bookshelf": "bookshelves", "knife": "knives",
              "mouse": "mice", "foot": "feet", "child": "children", "leaf": "leaves"}


def plural(label: str) -> str:
    """English plural of a (possibly multi-word) label: the last word is inflected."""
    head, _, last = label.rpartition(" ")
    if last in _IRREGULAR:
        word = _IRREGULAR[last]
    elif re.search(r"(s|x|z|ch|sh)$", last):
        word = last + "es"
    elif re.search(r"[^aeiou]y$", last):
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def ours() -> Path:
    """The bundled template folder."""
    return Path(str(files("templates")))


class TemplateError(ValueError):
    """A template is missing, has no paraphrases, or failed to render (names the template)."""


# ----------------------------------------------------------------------------- precompiled rendering
_SLOT = re.compile("\x00(\\d+)\x00")
# Nodes whose effect on the output the usage analysis cannot follow (calls, macros, assignments, ...).
_OPAQUE_BREAKERS = (nodes.Call, nodes.Macro, nodes.CallBlock, nodes.Assign, nodes.AssignBlock, nodes.With,
                    nodes.Import, nodes.FromImport, nodes.Scope, nodes.OverlayScope, nodes.FilterBlock,
                    nodes.ScopedEvalContextModifier, nodes.EvalContextModifier, nodes.ExprStmt)
_SCALAR_OK = frozenset({"print", "test"})  # a string printed verbatim or tested for emptiness
_LIST_OK = frozenset({"join", "length", "test"})


class _Unanalysable(Exception):
    pass


def _usage(name: nodes.Name, parents: list[nodes.Node]) -> str:
    """How one variable reference uses its value: print, join, length, test, iter:<target> or other."""
    p = parents[-1]
    if isinstance(p, nodes.Output):
        return "print"
    if isinstance(p, nodes.Filter) and p.node is name and not (p.kwargs or p.dyn_args or p.dyn_kwargs):
        if p.name in ("length", "count") and not p.args:
            return "length"
        if p.name == "join" and all(isinstance(a, nodes.Const) for a in p.args) \
                and isinstance(parents[-2], nodes.Output):
            return "join"
    if isinstance(p, nodes.For) and p.iter is name and isinstance(p.target, nodes.Name) \
            and p.test is None and not p.recursive:
        return f"iter:{p.target.name}"
    if isinstance(p, (nodes.If, nodes.CondExpr)) and p.test is name:
        return "test"
    if isinstance(p, nodes.Not) or (isinstance(p, nodes.Test) and p.node is name
                                    and p.name in ("none", "defined", "undefined") and not p.args):
        return "test"
    return "other"


def _usages(env: jinja2.Environment, body: Sequence[nodes.Node]) -> dict[str, frozenset[str]]:
    """Every variable the nodes read, with the ways they use it (follows constant includes)."""
    out: dict[str, set[str]] = {}

    def visit(node: nodes.Node, parents: list[nodes.Node]) -> None:
        if isinstance(node, _OPAQUE_BREAKERS) or (isinstance(node, nodes.Include)
                                                  and not isinstance(node.template, nodes.Const)):
            raise _Unanalysable
        if isinstance(node, nodes.Include):
            source, filename, _ = env.loader.get_source(env, node.template.value)
            for child in env.parse(source, node.template.value, filename).body:
                visit(child, parents + [node])
            return
        if isinstance(node, nodes.Name) and node.ctx == "load":
            out.setdefault(node.name, set()).add(_usage(node, parents))
        for child in node.iter_child_nodes():
            visit(child, parents + [node])

    for n in body:
        visit(n, [])
    return {k: frozenset(v) for k, v in out.items()}


def _freeze(value: Any) -> Hashable:
    """A key equal for two values exactly when jinja2 sees the same value (1, 1.0, True and -0.0 differ)."""
    t = type(value)
    if t is float:
        return t, repr(value)
    if t in (list, tuple):
        return t, tuple(_freeze(v) for v in value)
    if t is dict:
        return t, tuple((_freeze(k), _freeze(v)) for k, v in value.items())
    if value is None or t in (str, int, bool):
        return t, value
    raise TypeError(t)  # anything else: no skeleton (its printed form is not pinned down by a key)


class _Precompiled:
    """Renders one template or block through skeletons keyed by the context's shape (see module doc)."""

    def __init__(self, render: Callable[[dict[str, Any]], str], usages: dict[str, frozenset[str]] | None):
        self.render = render
        self.skeletons: dict[tuple, tuple[list[str], list[int]] | None] = {}
        # variable -> bit 1: a str value may fill a slot; bit 2: a list of str may fill slots; 0: neither
        self.modes: dict[str, int] = {}
        self.enabled = usages is not None
        for name, kinds in (usages or {}).items():
            loops = [k[5:] for k in kinds if k.startswith("iter:")]
            listed = (kinds - {f"iter:{t}" for t in loops}) <= _LIST_OK and all(
                usages.get(t, frozenset()) <= _SCALAR_OK for t in loops)
            self.modes[name] = (kinds <= _SCALAR_OK) | (listed << 1)

    def _slot(self, name: str, value: Any) -> int:
        """How a context value enters the skeleton: 0 unused, 1 one slot, 2 one slot per element, 3 in the key."""
        mode = self.modes.get(name)
        if mode is None:
            return 0
        t = type(value)
        if t is str and mode & 1:
            return 1
        if t is list and mode & 2 and all(type(v) is str for v in value):
            return 2
        return 3

    def __call__(self, context: dict[str, Any]) -> str:
        if not self.enabled:
            return self.render(context)
        key: list = []
        slots: list[str] = []
        modes = self.modes
        for name, value in context.items():  # the inlined equivalent of _slot (this runs twice per item)
            mode = modes.get(name)
            if mode is None:  # never read by the template: its value cannot matter
                key.append(name)
                continue
            t = type(value)
            if t is str and mode & 1:
                key.append((name, "s", value != ""))
                slots.append(value)
            elif t is list and mode & 2 and all(type(v) is str for v in value):
                key.append((name, "l", len(value)))
                slots.extend(value)
            elif value is None or t is str:
                key.append((name, "=", value))
            else:
                try:
                    key.append((name, "=", _freeze(value)))
                except TypeError:
                    return self.render(context)
        k = tuple(key)
        try:
            skeleton = self.skeletons[k]
        except KeyError:
            return self._compile(k, context)
        if skeleton is None:
            return self.render(context)
        literals, order = skeleton
        pieces = [literals[0]]
        for i, lit in zip(order, literals[1:]):
            pieces.append(slots[i])
            pieces.append(lit)
        return "".join(pieces)

    def _compile(self, key: tuple, context: dict[str, Any]) -> str:
        """Render for real, derive the skeleton of this shape, and keep it only if it reproduces the render."""
        text = self.render(context)
        slotted: dict[str, Any] = {}
        slots: list[str] = []
        for name, value in context.items():
            how = self._slot(name, value)
            if how == 1:
                slotted[name] = f"\x00{len(slots)}\x00"
                slots.append(value)
            elif how == 2:
                slotted[name] = [f"\x00{len(slots) + i}\x00" for i in range(len(value))]
                slots.extend(value)
            else:
                slotted[name] = value
        parts = _SLOT.split(self.render(slotted))
        literals, order = parts[0::2], [int(i) for i in parts[1::2]]
        ok = all(i < len(slots) for i in order) and not any("\x00" in lit for lit in literals)
        if ok:
            pieces = [literals[0]]
            for i, lit in zip(order, literals[1:]):
                pieces += [slots[i], lit]
            ok = "".join(pieces) == text
        self.skeletons[key] = (literals, order) if ok else None
        return text


class Templates:
    """Renders question paraphrases and wraps them into the final prompt."""

    def __init__(self, user_dir: str | Path | None = None):
        search = [str(ours())]
        if user_dir is not None:
            user = Path(user_dir)
            if not user.is_dir():
                raise TemplateError(f"{user}: template folder does not exist")
            search.insert(0, str(user))
            env_cls: type[jinja2.Environment] = SandboxedEnvironment
        else:
            env_cls = jinja2.Environment
        self.sandboxed = user_dir is not None
        self.env = env_cls(
            loader=jinja2.FileSystemLoader(search),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
        )
        self.env.filters["plural"] = plural
        self._blocks: dict[str, list[_Precompiled]] = {}
        self._prompt: _Precompiled | None = None

    def _template(self, name: str) -> jinja2.Template:
        try:
            return self.env.get_template(name)
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"{name}: template not found") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{exc.filename or name}:{exc.lineno}: {exc.message}") from exc

    def _analyse(self, name: str, block: str | None = None) -> dict[str, frozenset[str]] | None:
        """Variable usages of a template (or one of its blocks); None when they cannot be followed."""
        if self.env.autoescape or self.env.finalize is not None:
            return None
        source, filename, _ = self.env.loader.get_source(self.env, name)
        tree = self.env.parse(source, name, filename)
        body = tree.body if block is None else next(b.body for b in tree.find_all(nodes.Block) if b.name == block)
        try:
            return _usages(self.env, body)
        except _Unanalysable:
            return None

    def paraphrases(self, subtask: str) -> list[_Precompiled]:
        """The paraphrase renderers of a subtask (context dict -> raw text), in block-number order."""
        if subtask not in self._blocks:
            name = f"questions/{subtask}.j2"
            tmpl = self._template(name)
            numbered = sorted((int(m.group(1)), block, fn) for block, fn in tmpl.blocks.items()
                              if (m := _PARAPHRASE.match(block)))
            if not numbered:
                raise TemplateError(f"{name}: no paraphrase_N blocks")
            self._blocks[subtask] = [
                _Precompiled(lambda c, fn=fn: "".join(fn(tmpl.new_context(c))), self._analyse(name, block))
                for _, block, fn in numbered]
        return self._blocks[subtask]

    def n_paraphrases(self, subtask: str) -> int:
        return len(self.paraphrases(subtask))

    def question(self, subtask: str, variant: int, **context: Any) -> str:
        """Render paraphrase `variant` (0-based) of a subtask's question."""
        blocks = self.paraphrases(subtask)
        try:
            text = blocks[variant % len(blocks)](context)
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"questions/{subtask}.j2 paraphrase {variant + 1}: {exc.message}") from exc
        return " ".join(text.split())

    def prompt(self, question: str, kind: str, *, options: Sequence[str] | None = None,
               unit: str | None = None, classes: Sequence[str] | None = None,
               vocabulary: Sequence[str] | None = None, dims: int | None = None) -> str:
        """Wrap a question: lettered options if any, and the expected answer form."""
        if options is not None and len(options) > len(LETTERS):
            raise TemplateError(f"prompt.j2: {len(options)} options, at most {len(LETTERS)}")
        if self._prompt is None:
            tmpl = self._template("prompt.j2")
            self._prompt = _Precompiled(tmpl.render, self._analyse("prompt.j2"))
        try:
            return self._prompt(dict(
                question=question, kind=kind, options=list(options) if options else None, letters=LETTERS,
                unit=unit, classes=classes, vocabulary=vocabulary, dims=dims)).strip()
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"prompt.j2: {exc.message}") from exc


@lru_cache(maxsize=8)
def templates(user_dir: str | None = None) -> Templates:
    """A shared, cached template set (ours, or a user's folder over ours)."""
    return Templates(user_dir)

"""Question templates: jinja2 files under `templates/`, one per subtask, each with numbered
`paraphrase_N` blocks, plus the prompt wrapper (`prompt.j2`) and the multiple-choice rendering
(`multiple_choice.j2`).

Undefined variables are errors (StrictUndefined) so that a template typo fails loudly instead of
emitting a question with a hole in it. A user's own template folder overrides ours file by file;
because its contents are not ours, everything then renders in jinja2's sandbox.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable, Sequence

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from numerical3d.errors import Numerical3DError
from numerical3d.verifiers.units import UNITS

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
    return Path(str(files("numerical3d.templates")))


class TemplateError(ValueError, Numerical3DError):
    """A template is missing, has no paraphrases, or failed to render (names the template)."""


class Templates:
    """Renders question paraphrases and wraps them into the final prompt."""

    def __init__(self, user_dir: str | Path | None = None, extra: Sequence[str] = ()):
        search = [str(ours()), *extra]  # extra: folders of subtasks that bring their own template
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
        self._compiled: dict[str, jinja2.Template] = {}
        self._blocks: dict[str, list[Callable[[dict[str, Any]], str]]] = {}

    def _template(self, name: str) -> jinja2.Template:
        """The compiled template, one per file, loaded once (jinja2 would stat the file on every lookup)."""
        if name in self._compiled:
            return self._compiled[name]
        try:
            tmpl = self._compiled[name] = self.env.get_template(name)
            return tmpl
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"{name}: template not found") from exc
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{exc.filename or name}:{exc.lineno}: {exc.message}") from exc

    def paraphrases(self, subtask: str) -> list[Callable[[dict[str, Any]], str]]:
        """The paraphrase renderers of a subtask (context dict -> raw text), in block-number order."""
        if subtask not in self._blocks:
            name = f"questions/{subtask}.j2"
            tmpl = self._template(name)
            numbered = sorted((int(m.group(1)), block, fn) for block, fn in tmpl.blocks.items()
                              if (m := _PARAPHRASE.match(block)))
            if not numbered:
                raise TemplateError(f"{name}: no paraphrase_N blocks")
            self._blocks[subtask] = [lambda c, fn=fn: "".join(fn(tmpl.new_context(c))) for _, _, fn in numbered]
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
        try:
            return self._template("prompt.j2").render(
                question=question, kind=kind, options=list(options) if options else None, letters=LETTERS,
                unit=unit, unit_words=UNITS[unit].words if unit in UNITS else unit, classes=classes, vocabulary=vocabulary, dims=dims).strip()
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"prompt.j2: {exc.message}") from exc


def question_of(prompt: str) -> str:
    """The question a published prompt wraps: its lines before the options or the answer format.

    A published row holds only the prompt (the `question` column is what a model reads), so a
    reader of a dataset folder recovers the question here, beside the template that composes it.
    """
    lines = []
    for line in prompt.splitlines():
        if line.startswith(("Options:", "First think")):
            break
        lines.append(line)
    return " ".join(lines).strip() or prompt.strip()


def check_folder(user_dir: str | Path) -> None:
    """A user's template folder exists and each of its templates parses (before any scene uses it)."""
    folder = Path(user_dir)
    if not folder.is_dir():
        raise TemplateError(f"{folder}: template folder does not exist")
    env = SandboxedEnvironment()
    for path in sorted(folder.rglob("*.j2")):
        try:
            env.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{path}:{exc.lineno}: {exc.message}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{path}: unreadable: {exc}") from exc


def templates(user_dir: str | None = None, extra: tuple[str, ...] = ()) -> Templates:
    """A shared, cached template set (ours and `extra` folders, or a user's folder over them).

    A user's folder is cached by the content of its files too, so a process that lives across
    builds (`numerical3d serve`) renders an edited template, not the old one (a few small files
    read once per scene).
    """
    return _templates(user_dir, extra, _content(user_dir))


def _content(user_dir: str | None) -> str:
    folder = Path(user_dir) if user_dir is not None else None
    if folder is None or not folder.is_dir():
        return ""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(folder).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=8)
def _templates(user_dir: str | None, extra: tuple[str, ...], content: str) -> Templates:
    return Templates(user_dir, extra)

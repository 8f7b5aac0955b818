"""A pull request's diff as the page draws it: per file, its hunks' lines coloured by
Pygments (token classes, never HTML: the template escapes every text), and long runs of
unchanged context folded.

The input is the PR read's ``files`` (``api.project_factory.pulls.pull_detail``): raw text,
as the repository holds it. A hunk is lexed as one text (so a string or comment spanning
lines colours right) and split back into its lines.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from threading import Lock
from typing import Any

from pygments import lex
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

# Runs of unchanged lines longer than this fold, keeping KEEP lines either side in view.
FOLD_OVER = 8
KEEP = 3
# A file's lines beyond this are not coloured (still shown, escaped): colouring is for reading.
COLOUR_LIMIT = 20_000


@dataclass(frozen=True)
class Line:
    kind: str  # context, add, del
    old_no: int | None
    new_no: int | None
    tokens: tuple[tuple[str, str], ...]  # (pygments short class or "", text)

    @property
    def number(self) -> int:
        """The line a comment names: the new side's, or the old side's for a removed line."""
        return self.new_no if self.new_no is not None else (self.old_no or 0)

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-"}.get(self.kind, " ")

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.tokens)


@dataclass(frozen=True)
class Block:
    """Lines shown as they are, or folded (``folded``) behind a disclosure."""

    lines: tuple[Line, ...]
    folded: bool = False


@dataclass(frozen=True)
class HunkView:
    header: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class FileView:
    path: str
    old_path: str
    status: str
    binary: bool
    additions: int
    deletions: int
    hunks: tuple[HunkView, ...] = field(default=())

    @property
    def lines(self) -> int:
        return sum(len(block.lines) for hunk in self.hunks for block in hunk.blocks)

    @property
    def anchor(self) -> str:
        return "file-" + "".join(c if c.isalnum() else "-" for c in self.path)


# The token classes the page colours (static/css/pull.css); the rest print as plain text.
COLOURED = ("k", "s", "c", "m", "nf", "fm", "nc", "nb", "bp", "nt", "na")


@cache
def _class_of(ttype: _TokenType) -> str:
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    css = STANDARD_TYPES[ttype]
    return css if css.startswith(COLOURED[:4]) or css in COLOURED else ""


@cache
def lexer_for(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def warm() -> None:
    """Pygments' first lexer lookup compiles every file pattern it knows: done at start-up,
    not in a reader's first request."""
    lexer_for("warm.py")


def coloured(path: str, texts: list[str]) -> list[tuple[tuple[str, str], ...]]:
    """``texts`` (lines without their newline) as token runs, one per line."""
    if not texts:
        return []
    if sum(len(t) for t in texts) > COLOUR_LIMIT * 10 or len(texts) > COLOUR_LIMIT:
        return [(("", text),) for text in texts]
    lines: list[list[tuple[str, str]]] = [[]]
    for ttype, value in lex("\n".join(texts), lexer_for(path)):
        css = _class_of(ttype)
        pieces = value.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                lines.append([])
            if not piece:
                continue
            line = lines[-1]
            if line and line[-1][0] == css:  # one run per colour
                line[-1] = (css, line[-1][1] + piece)
            else:
                line.append((css, piece))
    lines = lines[: len(texts)] + [[] for _ in range(len(texts) - len(lines))]
    return [tuple(line) for line in lines]


def _blocks(lines: list[Line]) -> tuple[Block, ...]:
    """Visible lines, with runs of more than FOLD_OVER context lines folded in the middle."""
    blocks: list[Block] = []
    shown: list[Line] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].kind == "context":
            j += 1
        run = j - i
        if run > FOLD_OVER:
            head = KEEP if i > 0 else 0  # a hunk's leading context keeps only its end in view
            tail = KEEP if j < len(lines) else 0
            shown.extend(lines[i : i + head])
            if shown:
                blocks.append(Block(tuple(shown)))
            blocks.append(Block(tuple(lines[i + head : j - tail]), folded=True))
            shown = list(lines[j - tail : j])
            i = j
        elif run:
            shown.extend(lines[i:j])
            i = j
        else:
            shown.append(lines[i])
            i += 1
    if shown:
        blocks.append(Block(tuple(shown)))
    return tuple(blocks)


def file_view(file: Mapping[str, Any]) -> FileView:
    path = str(file["path"])
    hunks: list[HunkView] = []
    for hunk in file.get("hunks") or ():
        raw = list(hunk.get("lines") or ())
        tokens = coloured(path, [str(line.get("text", "")) for line in raw])
        lines = [
            Line(str(line.get("kind", "context")), line.get("old_no"), line.get("new_no"), tokens[n])
            for n, line in enumerate(raw)
        ]
        hunks.append(HunkView(str(hunk.get("header", "")), _blocks(lines)))
    return FileView(
        path=path,
        old_path=str(file.get("old_path") or ""),
        status=str(file.get("status", "modified")),
        binary=bool(file.get("binary")),
        additions=int(file.get("additions", 0)),
        deletions=int(file.get("deletions", 0)),
        hunks=tuple(hunks),
    )


def files_view(files: Iterable[Mapping[str, Any]]) -> list[FileView]:
    return [file_view(f) for f in files]


_views: OrderedDict[tuple[str, str], list[FileView]] = OrderedDict()
VIEWS_KEPT = 16
_views_lock = Lock()


def diff_of(base_sha: str, head_sha: str, files: Iterable[Mapping[str, Any]]) -> list[FileView]:
    """``files_view`` of the diff between two commits, kept for the last VIEWS_KEPT pairs: two
    commit ids name their diff for good, so a page read again is not coloured again."""
    key = (base_sha, head_sha)
    with _views_lock:
        if key in _views:
            _views.move_to_end(key)
            return _views[key]
    found = files_view(files)
    with _views_lock:
        _views[key] = found
        while len(_views) > VIEWS_KEPT:
            _views.popitem(last=False)
    return found

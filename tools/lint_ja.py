"""Lint the Japanese prose of the site with textlint.

    python -m tools.lint_ja [FILE ...]      (make lint-ja FILES=...)

lints the given files (default: every ``notebooks/NN-*.py``,
``docs/*.ja.md`` and the lists the site builds from) and prints one line per message,
``path:line:column: message (rule)``, with the line and column of the
source file, so that a message points at the line to edit. Exit status 1
if there is any message.

What is linted:

- the ``lang="ja"`` markdown cells of a notebook's ``.py`` source (jupytext
  percent format: the ``# `` prefix of each line is stripped), with their
  line breaks joined as the site's split hook joins them
  (``hooks/japanese_lines.py``, ``join_cjk_lines``), so the lint sees the text
  as rendered;
- the Japanese figure alt text, ``alt={"en": [...], "ja": [...]}`` on a
  code cell's ``# %%`` line;
- ``docs/*.ja.md``, with the same join (the hook applies it to them too);
- the ``ja`` lines of the lists the site builds its tables from
  (``notebooks/chapters.yml``, ``docs/api.yml``), each as the cell of a
  Markdown table, as the site shows it.

Before linting, fenced code blocks are dropped, and inline code and math
are replaced by Latin placeholders (``CODE`` for code, ``X`` for ``$...$``
and ``$$...$$`` inside a line; a ``$$...$$`` on lines of its own is a
block, and is dropped with the line break before it), so the spacing rules still see a Latin word where the
code or formula sits ("位置 $p$ の" passes, "位置$p$の" fails) while the
content of a formula cannot trip a rule. List items under a ``参考文献``
heading are not linted: bibliographic records keep their English form.

The prh dictionary is generated from CONTRIBUTING.md ("Japanese style"):
each item of the list under its ``## 使わない表記`` heading reads
``- term：variant、variant（→ fix）``; the lint rejects each variant and
proposes the explicit fix, or else the term. A fix gives context where a
bare word would be ambiguous (``テンソルの形（→ テンソルの形状）``), and
``…`` / $…$ stand for any code / math (masked as the lint masks them).

All files go to one textlint process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hooks.japanese_lines import JOINABLE_BREAK, join_break  # the site's line join

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".textlintrc.yml"
STYLE_GUIDE = ROOT / "CONTRIBUTING.md"  # its 使わない表記 list feeds the prh dictionary
TEXTLINT = ROOT / "node_modules" / ".bin" / "textlint"

MATH_PLACEHOLDER = "X"
CODE_PLACEHOLDER = "CODE"


#: the lists whose ``ja`` lines the site shows (hooks/chapters.py, hooks/api_reference.py)
LISTS = ("notebooks/chapters.yml", "docs/api.yml")


def default_files(root: Path = ROOT) -> list[Path]:
    """Every chapter source, every Japanese hand-written page, and the lists."""
    return (
        sorted(root.glob("notebooks/[0-9][0-9]-*.py"))
        + sorted(root.glob("docs/*.ja.md"))
        + [root / name for name in LISTS]
    )


# --------------------------------------------------------------------------
# Text with an origin for every character


@dataclass
class Text:
    """A string and, for each character, its (line, column) in the source (1-based)."""

    chars: str = ""
    origin: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def from_line(cls, text: str, line: int, col: int) -> Text:
        return cls(text, [(line, col + k) for k in range(len(text))])

    def __add__(self, other: Text) -> Text:
        return Text(self.chars + other.chars, self.origin + other.origin)

    def join_lines(self, lines: list[Text]) -> Text:
        out = Text()
        for k, line in enumerate(lines):
            if k:
                out += self._sep("\n", out, line)
            out += line
        return out

    @staticmethod
    def _sep(sep: str, before: Text, after: Text) -> Text:
        where = before.origin[-1] if before.origin else after.origin[0] if after.origin else (1, 1)
        return Text(sep, [where] * len(sep))

    def sub(self, pattern: re.Pattern, repl) -> Text:
        """Like ``re.sub``; a replacement's characters take the origin of the match's start."""
        out, pos = Text(), 0
        for m in pattern.finditer(self.chars):
            out += Text(self.chars[pos : m.start()], self.origin[pos : m.start()])
            new = repl(m) if callable(repl) else repl
            if new == m[0]:  # kept as it is: keep the origins too
                out += Text(new, self.origin[m.start() : m.end()])
            else:
                where = self.origin[min(m.start(), len(self.origin) - 1)]
                out += Text(new, [where] * len(new))
            pos = m.end()
        return out + Text(self.chars[pos:], self.origin[pos:])


# --------------------------------------------------------------------------
# Masking

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
_DISPLAY_MATH_LINE = re.compile(r"(?:\A|\n)[ \t]*\$\$.+?(?<!\\)\$\$[ \t]*(?=\n|\Z)", re.DOTALL)
_DISPLAY_MATH = re.compile(r"(?<!\\)\$\$.+?(?<!\\)\$\$", re.DOTALL)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)[^$\n]+?(?<![\\$])\$(?!\$)")


def mask(text: Text) -> Text:
    """Drop fenced code; replace inline code and math by Latin placeholders."""
    text = text.sub(_FENCE, "")
    text = text.sub(_CODE, CODE_PLACEHOLDER)
    text = text.sub(_DISPLAY_MATH_LINE, "")  # a formula on its own lines: a block
    text = text.sub(_DISPLAY_MATH, MATH_PLACEHOLDER)
    return text.sub(_INLINE_MATH, MATH_PLACEHOLDER)


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


#: headings whose list items are not linted: bibliographic records keep their
#: English form, and the style guide's list of variants holds the rejected words.
EXEMPT_LISTS = ("参考文献", "使わない表記")


def drop_reference_lists(lines: list[Text]) -> list[Text]:
    """Blank the list items (with their continuation lines) under an EXEMPT_LISTS heading."""
    out, ref_level, in_list = [], None, False
    for line in lines:
        s = line.chars
        heading = _HEADING.match(s)
        if heading:
            level = len(heading[1])
            if ref_level is not None and level <= ref_level:
                ref_level = None
            if heading[2] in EXEMPT_LISTS:
                ref_level = level
            in_list = False
        elif ref_level is not None:
            if _LIST_ITEM.match(s):
                in_list = True
            elif s.strip() and not s.startswith((" ", "\t")):
                in_list = False
            if in_list:
                line = Text("", [])
        out.append(line)
    return out


# --------------------------------------------------------------------------
# Extraction

_CELL = re.compile(r"^# %%(.*)$")
_ALT = re.compile(r"\balt=")


def _alt_texts(header: str) -> list[str]:
    m = _ALT.search(header)
    if m is None:
        return []
    alt, _ = json.JSONDecoder().raw_decode(header, m.end())
    return list(alt.get("ja", []))


def extract_notebook(path: Path) -> list[Text]:
    """The Japanese prose cells and alt texts of a jupytext percent ``.py``, one Text each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Text] = []
    cell: list[Text] | None = None

    def close():
        if cell is not None:
            text = Text().join_lines(drop_reference_lists(cell))
            blocks.append(text.sub(JOINABLE_BREAK, join_break))  # as the split hook renders it

    for n, line in enumerate(lines, start=1):
        m = _CELL.match(line)
        if m:
            close()
            header = m[1]
            cell = [] if "[markdown]" in header and 'lang="ja"' in header else None
            for alt in _alt_texts(header):
                encoded = json.dumps(alt, ensure_ascii=False)[1:-1]
                col = line.find(encoded)
                col = col + 1 if col >= 0 and encoded == alt else line.find("alt=") + 1
                blocks.append(Text.from_line(alt, n, col))
            continue
        if cell is not None:
            if line == "#":
                cell.append(Text("", []))
            elif line.startswith("# "):
                cell.append(Text.from_line(line[2:], n, 3))
            else:  # the blank line that ends a cell, or anything unexpected
                cell.append(Text("", []))
    close()
    return blocks


def extract_markdown(path: Path) -> list[Text]:
    lines = path.read_text(encoding="utf-8").splitlines()
    texts = [Text.from_line(line, n, 1) for n, line in enumerate(lines, start=1)]
    text = Text().join_lines(drop_reference_lists(texts))
    return [text.sub(JOINABLE_BREAK, join_break)]  # as the hook renders docs/*.ja.md


def extract_list(path: Path) -> list[Text]:
    """Each ``ja:`` value of a YAML list as the one cell of a table, at its line."""
    blocks, nodes = [], [yaml.compose(path.read_text(encoding="utf-8"))]
    while nodes:
        node = nodes.pop(0)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == "ja" and isinstance(value, yaml.ScalarNode):
                    col = value.start_mark.column + 1 + (value.style is not None)  # past a quote
                    cell = Text.from_line(value.value, value.start_mark.line + 1, col)
                    frame = Text._sep("| ja |\n|---|\n| ", Text(), cell)
                    blocks.append(frame + cell + Text._sep(" |", cell, Text()))
                else:
                    nodes.append(value)
        elif isinstance(node, yaml.SequenceNode):
            nodes += node.value
    return blocks


def extract(path: Path) -> Text:
    """The masked Japanese prose of one file, blocks separated by blank lines."""
    extractors = {".py": extract_notebook, ".yml": extract_list}
    blocks = extractors.get(path.suffix, extract_markdown)(path)
    out = Text()
    for block in blocks:
        block = mask(block)
        if not block.chars.strip():
            continue
        if out.chars:
            out += Text._sep("\n\n", out, block)
        out += block
    return out + Text._sep("\n", out, Text())


# --------------------------------------------------------------------------
# The prh dictionary from the style guide (CONTRIBUTING.md)

VARIANTS_HEADING = "使わない表記"
_ITEM = re.compile(r"^- (?P<term>[^：]+)：(?P<variants>.+)$")
_FIX = re.compile(r"^(?P<variant>.+?)（→ (?P<fix>.+)）$")


def _placeholders(text: str) -> str:
    """`…` and $…$ in a style-guide entry stand for code and math: mask them as the lint does."""
    return re.sub(r"\$[^$]*\$", MATH_PLACEHOLDER, re.sub(r"`[^`]*`", CODE_PLACEHOLDER, text))


def variants(path: Path = STYLE_GUIDE) -> list[tuple[str, str]]:
    """(variant, fix) pairs from the list under the style guide's 使わない表記 heading.

    Each item is ``- term：variant、variant（→ fix）``: a variant without an
    explicit fix is fixed by the item's term.
    """
    pairs, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = _HEADING.match(line)
        if heading:
            inside = heading[2] == VARIANTS_HEADING
            continue
        item = _ITEM.match(line) if inside else None
        if item:
            for entry in item["variants"].split("、"):
                fix = _FIX.match(entry.strip())
                variant, expected = (
                    (fix["variant"], fix["fix"]) if fix else (entry.strip(), item["term"])
                )
                pairs.append((_placeholders(variant), _placeholders(expected)))
    return pairs


def _js_escape(text: str) -> str:
    return re.sub(r"([\\^$.*+?()[\]{}|/])", r"\\\1", text)


def prh_rules(path: Path = STYLE_GUIDE) -> list[dict]:
    """prh rules: each variant -> its fix, as a regular expression that does not
    match inside the fix itself (テンソルの形 must not fire on テンソルの形状)."""
    rules = []
    for variant, expected in variants(path):
        guards = []
        for k in (m.start() for m in re.finditer(re.escape(variant), expected)):
            before, after = expected[:k], expected[k + len(variant) :]
            guard = _js_escape(variant + after)
            guards.append(f"(?!(?<={_js_escape(before)}){guard})" if before else f"(?!{guard})")
        rules.append({"expected": expected, "pattern": f"/{''.join(guards)}{_js_escape(variant)}/"})
    return rules


def write_prh(target: Path, style_guide: Path = STYLE_GUIDE) -> Path:
    target.write_text(
        yaml.safe_dump({"version": 1, "rules": prh_rules(style_guide)}, allow_unicode=True),
        encoding="utf-8",
    )
    return target


# --------------------------------------------------------------------------
# Running textlint


@dataclass
class Message:
    path: str
    line: int
    column: int
    text: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.text} ({self.rule})"


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


# The presets have no rule for a space next to 。 or 、 (ja-space-between-
# half-and-full-width excepts punctuation), so this one check is done here.
PUNCTUATION_RULE = "lint-ja/no-space-around-japanese-punctuation"
_PUNCTUATION_SPACE = re.compile(r"[。、][ \t\u3000]+(?=[^\s|])|(?<=[^\s|])[ \t\u3000]+[。、]")


def punctuation_spaces(path: Path, text: Text, root: Path = ROOT) -> list[Message]:
    """A space after or before 。 or 、 in the masked text (table borders aside)."""
    out = []
    for m in _PUNCTUATION_SPACE.finditer(text.chars):
        line, col = text.origin[m.start()]
        body = "句読点（。、）の前後にスペースを入れません。"
        out.append(Message(_display(path, root), line, col, body, PUNCTUATION_RULE))
    return out


# Two house conventions of CONTRIBUTING.md ("Japanese style") that a
# dictionary cannot express: no space before %, and a chapter link that
# quotes its title inside the link.
PERCENT_RULE = "lint-ja/no-space-before-percent"
_PERCENT_SPACE = re.compile(r"(?<=[0-9])[ \t\u3000]+%")
CHAPTER_LINK_RULE = "lint-ja/chapter-link-quotes-inside"
_QUOTED_LINK = re.compile(r"「\[[^\]\n]+\]\([^)\n]+\)」")


def house_conventions(path: Path, text: Text, root: Path = ROOT) -> list[Message]:
    """A space before % (36 %), and 「[タイトル](…)」 where [「タイトル」](…) is meant."""
    out = []
    checks = (
        (_PERCENT_SPACE, PERCENT_RULE, "% の前にスペースを入れません（36%）。"),
        (
            _QUOTED_LINK,
            CHAPTER_LINK_RULE,
            "章へのリンクは「」ごとリンクにします：[「タイトル」](../slug/)の章。",
        ),
    )
    for pattern, rule, body in checks:
        for m in pattern.finditer(text.chars):
            line, col = text.origin[m.start()]
            out.append(Message(_display(path, root), line, col, body, rule))
    return out


def _utf16_to_index(chars: str) -> list[int]:
    """For each UTF-16 offset into ``chars`` (textlint counts in JavaScript
    string units), the index of its character in the Python string."""
    out = []
    for k, ch in enumerate(chars):
        out += [k] * (2 if ord(ch) > 0xFFFF else 1)
    return [*out, len(chars)]


# CommonMark closes ** only when it is "right-flanking": after punctuation
# such as 。 it must be followed by a space or punctuation, so
# 「**注意。**次の」 shows the asterisks; 「**注意。** 次の」 is bold.
BOLD_RULE = "lint-ja/bold-closed-after-punctuation"
_BOLD_MARK = re.compile(r"\*\*")
_CLOSES_BADLY = re.compile(r"[。、：；）」』！？]$")
_LETTER = re.compile(r"[\u3040-\u30ff\u4e00-\u9fffA-Za-z0-9]")


def broken_bold(path: Path, text: Text, root: Path = ROOT) -> list[Message]:
    """A closing ** after Japanese punctuation and before a letter (renders as **).

    The marks of a paragraph pair up in order: the second, fourth, ... close.
    """
    out = []
    offset = 0
    for paragraph in text.chars.split("\n\n"):
        marks = [m.start() for m in _BOLD_MARK.finditer(paragraph)]
        for k in marks[1::2]:
            before, after = paragraph[:k], paragraph[k + 2 : k + 3]
            if _CLOSES_BADLY.search(before) and _LETTER.match(after):
                line, col = text.origin[offset + k]
                body = "句読点の直後で閉じる ** の後には、スペースを入れます（入れないと太字になりません）。"
                out.append(Message(_display(path, root), line, col, body, BOLD_RULE))
        offset += len(paragraph) + 2
    return out


def lint(files: list[Path], root: Path = ROOT, style_guide: Path = STYLE_GUIDE) -> list[Message]:
    """Lint ``files`` in one textlint run; return the messages in source coordinates."""
    if not TEXTLINT.exists():
        raise FileNotFoundError(f"{TEXTLINT} is missing: run `make setup` (npm ci) first")
    messages: list[Message] = []
    with tempfile.TemporaryDirectory(prefix="lint-ja-") as tmp:
        tmpdir = Path(tmp)
        config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
        config["rules"]["prh"]["rulePaths"] = [str(write_prh(tmpdir / "prh.yml", style_guide))]
        config_path = tmpdir / "textlintrc.json"
        config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        texts: dict[str, tuple[Path, Text]] = {}
        for k, path in enumerate(files):
            text = extract(Path(path))
            virtual = tmpdir / f"{k:03d}.md"
            virtual.write_text(text.chars, encoding="utf-8")
            texts[str(virtual.resolve())] = (Path(path), text)
        result = subprocess.run(
            [str(TEXTLINT), "--format", "json", "--no-color", "--config", str(config_path), *texts],
            capture_output=True,
            text=True,
            cwd=root,
        )
        if result.returncode not in (0, 1) or not result.stdout.strip():
            raise RuntimeError(f"textlint failed ({result.returncode}):\n{result.stderr}")
        for report in json.loads(result.stdout):
            path, text = texts[str(Path(report["filePath"]).resolve())]
            starts = [0] + [m.end() for m in re.finditer("\n", text.chars)]
            utf16 = _utf16_to_index(text.chars)
            for msg in report["messages"]:
                # The offset, not the line and column: some rules (sentence-
                # length) report a column that is not the one of their index.
                if "range" in msg or "index" in msg:
                    offset = utf16[min(msg.get("range", [msg.get("index")])[0], len(utf16) - 1)]
                else:
                    offset = starts[msg["line"] - 1] + msg["column"] - 1
                line, col = text.origin[min(offset, len(text.origin) - 1)]
                body = " ".join(msg["message"].split())
                body = re.sub(r"^Line \d+ sentence", "Sentence", body)  # a line of the masked text
                if msg["ruleId"] == "prh":  # show the style guide's notation for the placeholders
                    body = body.replace(CODE_PLACEHOLDER, "`…`")
                    body = re.sub(rf"\b{MATH_PLACEHOLDER}\b", "$…$", body)
                messages.append(Message(_display(path, root), line, col, body, msg["ruleId"]))
        for path, text in texts.values():
            messages += punctuation_spaces(path, text, root)
            messages += broken_bold(path, text, root)
            messages += house_conventions(path, text, root)
    messages.sort(key=lambda m: (m.path, m.line, m.column))
    return messages


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or default_files()
    messages = lint(files)
    for m in messages:
        print(m)
    sys.stdout.flush()
    if messages:
        counts: dict[str, int] = {}
        for m in messages:
            counts[m.path] = counts.get(m.path, 0) + 1
        summary = ", ".join(f"{p} {n}" for p, n in counts.items())
        print(f"{len(messages)} Japanese lint messages ({summary})", file=sys.stderr)
    return 1 if messages else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""textlint on the Japanese prose (tools/lint_ja.py, `make lint-ja`).

The first test lints every chapter, the Japanese alt text and docs/*.ja.md
and fails on any message. The others lint small temporary files, all in one
textlint run, and show that the lint catches what the house style forbids
(and leaves alone what it allows), at the right line of the source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import lint_ja

ROOT = Path(__file__).resolve().parents[2]


def test_japanese_prose_has_no_lint_messages():
    messages = lint_ja.lint(lint_ja.default_files())
    listing = "\n".join(map(str, messages))
    assert not messages, f"{len(messages)} Japanese lint messages (`make lint-ja`):\n{listing}"


def _notebook(ja: list[str], *, alt: str = "", en: str = "An aside (in English) is fine.") -> str:
    """A jupytext percent source: an English cell, its Japanese twin, a code cell."""
    lines = ['# %% [markdown] lang="en"', f"# {en}", "", '# %% [markdown] lang="ja"']
    lines += [f"# {line}" if line else "#" for line in ja]
    lines += ["", f"# %%{' alt=' + alt if alt else ''}", "x = 1", ""]
    return "\n".join(lines)


# name -> (file name, content); the Japanese cell starts on line 5 of a notebook
SAMPLES = {
    "clean": (
        "01-clean.py",
        _notebook(
            [
                "# 正しい文",
                "",
                "位置 $p$ のベクトルを `sinusoidal` で作り、ファインチューニングします。",
                "式は次のとおりです。",
                "$$PE(p) = \\sin(\\omega p)$$",
                "全角の括弧（注釈）は文中に置きます。",
                "テンソルの形状は `(2, 3)` です。符号が一意なら問題ありません。",
                "1. 改行した項目の続きの行は",
                "   （字下げしても）つながります。",
                "",
                "## 参考文献",
                "",
                "- Vaswani, A. et al. (2017). *Attention Is All You Need* (参考). NeurIPS 2017.",
            ],
            alt='{"en": ["A plot (d = 8)."], "ja": ["d = 8 の図（左は正弦）。"]}',
        ),
    ),
    "half-width parentheses": (
        "02-paren.py",
        _notebook(["この値は、Vaswani ら (著者の実装) と同じです。"]),
    ),
    "variant term": (
        "03-term.py",
        _notebook(["最初の文です。", "このモデルを微調整します。"]),
    ),
    "no space around math and code": (
        "04-space.py",
        _notebook(["位置$p$のベクトルを`sinusoidal`で作ります。"]),
    ),
    "alt text": (
        "05-alt.py",
        _notebook(["図を描きます。"], alt='{"en": ["A plot."], "ja": ["正弦の図 (左は d = 8)。"]}'),
    ),
    "plain style in a list": (
        "06-list.py",
        _notebook(["次の 2 つです。", "", "- 1 つ目は距離である。", "- 2 つ目は位置です。"]),
    ),
    "space at punctuation": (
        "07-punct.py",
        _notebook(
            [
                "値は $x$ 、つまり 1 です。 次の文です。",
                "",
                "| 列 | 説明 |",
                "|---|---|",
                "| a | 値。 |",
            ]
        ),
    ),
    "page": ("sample.ja.md", "# 見出し\n\nこの章で微調整を行います。\n"),
    "list": (
        "chapters.yml",
        "parts:\n  - en: Part\n    ja: 部\n    chapters:\n"
        "      - slug: a\n        en: A line.\n        ja: 正しい行です。\n"
        "      - slug: b\n        en: B line.\n        ja: '`x` を微調整します。'\n",
    ),
    "bold closed after punctuation": (
        "09-bold.py",
        _notebook(
            ["- **注意。**次の文です。", "- **注意。** 次の文です。", "- **注意**：次の文です。"]
        ),
    ),
    "long sentence after a short one": (
        "08-long.py",
        _notebook(
            [
                "短い文です。",
                "これは長い文で、" + "位置の説明を続けて" * 12,
                "（補足）ので終わります。",
            ]
        ),
    ),
    "house conventions": (
        "09-house.py",
        _notebook(
            [
                "正解率は 36% で、95% 信頼区間は狭いです。",
                "詳しくは [「RoPE の導出」](../rope/)の章で説明します。",
                "正解率は 36 % でした。",
                "詳しくは「[RoPE の導出](../rope/)」の章で説明します。",
            ]
        ),
    ),
}


@pytest.fixture(scope="module")
def linted(tmp_path_factory) -> dict[str, list[lint_ja.Message]]:
    root = tmp_path_factory.mktemp("lint-ja")
    paths = {}
    for name, (file, text) in SAMPLES.items():
        paths[name] = root / file
        paths[name].write_text(text, encoding="utf-8")
    messages = lint_ja.lint(list(paths.values()))
    return {name: [m for m in messages if m.path == str(path)] for name, path in paths.items()}


def test_clean_japanese_passes(linted):
    # math, code and display math masked; English cells, full-width asides,
    # glossary terms, list continuation lines and reference lists pass
    assert linted["clean"] == []


def test_half_width_parentheses_around_a_japanese_aside_fail(linted):
    found = linted["half-width parentheses"]
    assert [(m.line, m.column, m.rule) for m in found] == [
        (5, 18, "jtf-style/4.3.1.丸かっこ（）"),
        (5, 24, "jtf-style/4.3.1.丸かっこ（）"),
    ]
    assert "全角のかっこ（）" in found[0].text


def test_a_term_outside_the_glossary_fails_with_the_glossary_term_as_fix(linted):
    found = linted["variant term"]
    assert [(m.line, m.column, m.rule) for m in found] == [(6, 9, "prh")]
    assert found[0].text == "微調整 => ファインチューニング"
    page = [(m.line, m.column, m.text) for m in linted["page"] if m.rule == "prh"]
    assert page == [(3, 5, "微調整 => ファインチューニング")]


def test_the_ja_lines_of_a_list_are_linted_at_their_line(linted):
    found = [(m.line, m.column, m.text) for m in linted["list"]]
    assert found == [(10, 19, "微調整 => ファインチューニング")]  # past the quote and `x`


def test_missing_space_between_japanese_and_math_or_code_fails(linted):
    found = linted["no space around math and code"]
    assert {m.rule for m in found} == {"ja-spacing/ja-space-between-half-and-full-width"}
    # before and after $p$ (columns 5-7 of the source line, the formula
    # reported at its start) and `sinusoidal` (from column 14)
    assert [m.column for m in found] == [4, 5, 13, 14]


def test_alt_text_is_linted_at_its_cell_line(linted):
    found = linted["alt text"]
    assert {(m.line, m.rule) for m in found} == {(7, "jtf-style/4.3.1.丸かっこ（）")}
    header = SAMPLES["alt text"][1].splitlines()[6]
    assert header[found[0].column - 1] == "("


def test_no_space_after_or_before_japanese_punctuation(linted):
    found = linted["space at punctuation"]
    assert [(m.line, m.column, m.rule) for m in found] == [
        (5, 9, lint_ja.PUNCTUATION_RULE),
        (5, 19, lint_ja.PUNCTUATION_RULE),
    ], "a space before 、 and after 。 (not the table border after 。)"


def test_a_long_sentence_is_reported_where_it_starts(linted):
    # textlint's sentence-length rule reports a column that is not its
    # offset's; the message must still point at the sentence's first line
    found = linted["long sentence after a short one"]
    assert [(m.line, m.column, m.rule) for m in found] == [
        (6, 3, "ja-technical-writing/sentence-length")
    ]


def test_bold_closed_after_punctuation_needs_a_space(linted):
    # only the first item: its closing ** cannot close (CommonMark flanking)
    found = [(m.line, m.column, m.rule) for m in linted["bold closed after punctuation"]]
    assert found == [(5, 10, lint_ja.BOLD_RULE)]


def test_lists_are_written_in_desu_masu(linted):
    found = linted["plain style in a list"]
    assert {(m.line, m.rule) for m in found} == {
        (7, "ja-technical-writing/no-mix-dearu-desumasu"),
        (7, "jtf-style/1.1.3.箇条書き"),
    }


def test_a_space_before_percent_and_a_link_inside_quotes_fail(linted):
    # lines 5-6 follow the conventions; line 7 has "36 %", line 8 「[…](…)」
    found = [(m.line, m.column, m.rule) for m in linted["house conventions"]]
    assert found == [(7, 10, lint_ja.PERCENT_RULE), (8, 7, lint_ja.CHAPTER_LINK_RULE)]


def test_the_style_guide_lists_the_variants_and_the_glossary_page_does_not():
    guide = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "## 使わない表記" in guide and lint_ja.STYLE_GUIDE == ROOT / "CONTRIBUTING.md"
    page = (ROOT / "docs" / "glossary.ja.md").read_text(encoding="utf-8")
    assert "使わない表記" not in page, "a contributors' rule, not a reader's page"


def test_every_style_guide_variant_is_rejected_and_its_fix_accepted(tmp_path):
    pairs = lint_ja.variants()
    assert ("微調整", "ファインチューニング") in pairs
    assert ("テンソルの形", "テンソルの形状") in pairs

    def unmask(text: str) -> str:  # placeholders back to code and math
        return text.replace(lint_ja.CODE_PLACEHOLDER, "`x`").replace(" X ", " $x$ ")

    wrong, right = tmp_path / "wrong.ja.md", tmp_path / "right.ja.md"
    wrong.write_text("".join(f"{unmask(v)}\n\n" for v, _ in pairs), encoding="utf-8")
    right.write_text("".join(f"{unmask(f)}\n\n" for _, f in pairs), encoding="utf-8")
    messages = [m for m in lint_ja.lint([wrong, right]) if m.rule == "prh"]
    hits = [m.line for m in messages if m.path == str(wrong)]
    assert hits == [2 * k + 1 for k in range(len(pairs))], "each variant is found once"
    assert [m for m in messages if m.path == str(right)] == [], "no fix trips a rule"


def test_messages_name_the_source_file():
    text = lint_ja.extract(ROOT / "notebooks" / "01-sinusoidal.py")
    assert text.chars and all(line >= 1 for line, _ in text.origin)
    assert "$" not in text.chars, "math is masked"

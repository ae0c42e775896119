"""What the Vega-Lite specs of the site's interactive figures share
(notebooks/explorables/, compiled by hooks/explorables.py)."""

from __future__ import annotations

# A reference line is grey. #808080 read faint on the dark scheme (reader
# review): there the grey is lighter, picked from the page's text colour
# (textColor, which explorables.js sets and updates on a switch of scheme;
# its text is light on the dark scheme). Both greys have at least 3:1 on
# their background.
GREY = {"light": "#808080", "dark": "#b8b8b8"}


def grey_param(name: str) -> dict:
    """A Vega signal ``name`` holding the reference grey of the page's scheme."""
    return {
        "name": name,
        "expr": f"luminance(textColor) > 0.5 ? '{GREY['dark']}' : '{GREY['light']}'",
    }


def title_expression(template: str, values: dict[str, str]) -> str:
    """A Vega expression for the label ``template`` with its placeholders filled.

    Each key of ``values`` (``"{d}"``) is replaced in ``template`` by the Vega
    expression it maps to (``"dim"``), so that the title follows the controls:
    ``title_expression("d = {d}", {"{d}": "dim"}) == "'d = ' + dim + ''"``.
    """
    title = "'" + template + "'"
    for key, value in values.items():
        title = title.replace(key, f"' + {value} + '")
    return title

"""What the Vega-Lite specs of the site's interactive figures share
(notebooks/explorables/, compiled by hooks/explorables.py)."""

from __future__ import annotations


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

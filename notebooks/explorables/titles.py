"""The one helper the explorable specs share (not an explorable itself).

hooks/explorables.py puts this folder on ``sys.path`` before it imports a
spec, so a spec imports it as ``from titles import title_expression``.
"""

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

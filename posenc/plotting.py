"""The site's figure style (optional: needs matplotlib, and matplotlib-fontja
for Japanese glyphs).

Figures are drawn on an opaque white canvas so they read the same in the
site's light and dark themes, with the Okabe-Ito colour cycle, which stays
distinguishable for colour-blind readers. Figures carry math symbols, not
sentences: the words live in the prose of each language.
"""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": eight colours that remain
# distinct under the common colour-vision deficiencies.
OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)

#: Sequential and diverging colour maps that are safe for colour-blind readers.
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"


def use_site_style() -> None:
    """Set matplotlib's defaults for the notebooks' figures.

    Call once at the top of a notebook. Raises ``ImportError`` with an
    installation hint when the plotting extras are missing.
    """
    try:
        import matplotlib as mpl
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("posenc.plotting needs matplotlib: pip install 'posenc[site]'") from err
    try:
        import matplotlib_fontja  # noqa: F401  (registers a Japanese font and selects it)
    except ImportError:  # Latin labels still render; Japanese glyphs would not
        pass

    from cycler import cycler

    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "savefig.facecolor": "white",
            "axes.prop_cycle": cycler(color=OKABE_ITO),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "image.cmap": SEQUENTIAL_CMAP,
            "font.size": 10,
            "legend.frameon": False,
            "figure.constrained_layout.use": True,
            # PNG metadata without a version string keeps re-executed
            # notebooks byte-identical across matplotlib releases.
            "svg.hashsalt": "posenc",
        }
    )

"""The site's figure style (optional: needs matplotlib, and matplotlib-fontja
for Japanese glyphs).

The site has a light and a dark scheme, and a figure is one PNG for both.
So figures have a transparent background (the page shows through) and
draw text, axes, ticks and the grid in a neutral grey, :data:`INK`, that
keeps about 4:1 contrast on white and on the dark scheme's slate alike;
data take the Okabe-Ito colours, which stay distinguishable for
colour-blind readers and visible on both backgrounds. In a notebook,
figures are stored at twice their displayed resolution (IPython's
"retina" format), sharp on high-density screens. Figures carry math
symbols, not sentences: the words live in the prose of each language.

In a chapter, use :data:`INK` (not black) for lines and text that are not
data, and leave the background alone.
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

#: Text, axes and reference lines: a grey with about 4:1 contrast against
#: both page backgrounds (white: 3.9, Material's slate #1e2129: 4.1).
INK = "#808080"

#: The colour cycle of the site's figures: Okabe-Ito, with their black (which
#: would vanish on the dark scheme) replaced by :data:`INK`.
CYCLE = (*OKABE_ITO[:-1], INK)

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
        raise ImportError(
            "posenc_lab.plotting needs matplotlib: pip install 'posenc[site]'"
        ) from err
    try:
        import matplotlib_fontja  # noqa: F401  (registers a Japanese font and selects it)
    except ImportError:  # Latin labels still render; Japanese glyphs would not
        pass

    from cycler import cycler

    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 200,
            # transparent: the page's own background shows in either scheme
            "figure.facecolor": "none",
            "figure.edgecolor": "none",
            "axes.facecolor": "none",
            "savefig.facecolor": "none",
            "savefig.edgecolor": "none",
            "savefig.transparent": True,
            "legend.facecolor": "none",
            "text.color": INK,
            "axes.labelcolor": INK,
            "axes.edgecolor": INK,
            "axes.titlecolor": INK,
            "xtick.color": INK,
            "ytick.color": INK,
            "xtick.labelcolor": INK,
            "ytick.labelcolor": INK,
            "grid.color": INK,
            "lines.linewidth": 1.8,
            "axes.prop_cycle": cycler(color=CYCLE),
            "axes.grid": True,
            "grid.alpha": 0.35,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "image.cmap": SEQUENTIAL_CMAP,
            # a figure is shown about as wide as it is drawn (640 px), so
            # text keeps its size: 11 pt at 100 dpi is 15 px, legends 10 pt
            "font.size": 11,
            "legend.fontsize": 10,
            "legend.title_fontsize": 10,
            "legend.frameon": False,
            "figure.constrained_layout.use": True,
            # PNG metadata without a version string keeps re-executed
            # notebooks byte-identical across matplotlib releases.
            "svg.hashsalt": "posenc",
        }
    )
    _retina_in_notebooks()


def _retina_in_notebooks() -> None:
    """In IPython, store inline figures at twice their displayed size."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # pragma: no cover - plain Python: savefig.dpi applies
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")

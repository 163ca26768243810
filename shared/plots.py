"""Plot conventions for the book: one seaborn theme, labelled axes with units, tight figures."""

from __future__ import annotations


def setup() -> None:
    """Apply the book's plotting theme and table display (call once per notebook)."""
    import matplotlib as mpl
    import seaborn as sns

    import pandas as pd

    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.precision", 3)  # tables show whole cells (claims, notes), not "62...."
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    mpl.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (7.5, 4.2),
                         "axes.titleweight": "bold", "figure.autolayout": True})


def finish(ax, *, title: str, xlabel: str, ylabel: str, legend_title: str | None = None):
    """Label a plot; every axis in the book names its quantity and unit."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend_title is not None and ax.get_legend() is not None:
        ax.get_legend().set_title(legend_title)
    return ax

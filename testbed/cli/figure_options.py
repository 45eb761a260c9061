"""``--figure-format`` and ``--figure-style`` of ``testbed run``, ``sweep`` and ``report``
(testbed/analysis/figures.py): the figures' file format and a matplotlib style."""

from __future__ import annotations

import argparse

from testbed.analysis.figures import FORMAT_ENV, FORMATS, STYLE_ENV, check_format, check_style, figure_output


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--figure-format", default=None, metavar="FMT",
                   help=f"figures as {' | '.join(FORMATS)} files (default: ${FORMAT_ENV}, else png); index.html "
                        "embeds png and svg figures and names pdf ones")
    p.add_argument("--figure-style", default=None, metavar="STYLE",
                   help=f"a matplotlib style for every figure: a .mplstyle file or a style's name, e.g. "
                        f"seaborn-v0_8-paper (default: ${STYLE_ENV}, else matplotlib's defaults)")


def applied(args: argparse.Namespace):
    """The context the command's figures are drawn in (checked first: a bad value is refused before any work)."""
    fmt = check_format(getattr(args, "figure_format", None))
    style = check_style(getattr(args, "figure_style", None))
    return figure_output(fmt, style)

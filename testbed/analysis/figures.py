"""How every figure is saved: the file format (``png``, ``svg`` or ``pdf``) and a matplotlib style.

Every plotting function of testbed draws on a ``matplotlib.figure.Figure`` and ends with
:func:`save`, which writes ``path`` with the suffix of the current format (``energy_mix.png``
becomes ``energy_mix.svg`` under ``svg``) and returns the path it wrote. The format and style are
chosen once around a command by :func:`figure_output` (``--figure-format`` and ``--figure-style``
of ``testbed run``, ``sweep`` and ``report``); without them, the environment variables
``TESTBED_FIGURE_FORMAT`` and ``TESTBED_FIGURE_STYLE`` apply, else png and matplotlib's defaults.

The style is anything ``matplotlib.style.use`` takes: a ``.mplstyle`` file's path or a style's name
(``seaborn-v0_8-paper``, ``ggplot``); it applies to the figures drawn inside :func:`figure_output`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from pathlib import Path
from typing import Iterator

from testbed.errors import SpecError

FORMATS = ("png", "svg", "pdf")
FORMAT_ENV, STYLE_ENV = "TESTBED_FIGURE_FORMAT", "TESTBED_FIGURE_STYLE"
WEB_FORMATS = ("png", "svg")  # what a browser shows in an <img>

_format: contextvars.ContextVar[str | None] = contextvars.ContextVar("figure_format", default=None)


def check_format(fmt: str | None, flag: str = "--figure-format") -> str:
    """``fmt`` (None: the environment's or png), or a SpecError naming ``flag`` and the choices."""
    where = flag if fmt is not None else FORMAT_ENV
    fmt = fmt if fmt is not None else (os.environ.get(FORMAT_ENV) or "png")
    if fmt not in FORMATS:
        raise SpecError([(where, f"unknown figure format {fmt!r} (choices: {', '.join(FORMATS)})")])
    return fmt


def check_style(style: str | None, flag: str = "--figure-style") -> str | None:
    """``style`` (None: the environment's, or no style), checked: a file that exists, or a style
    matplotlib knows by name."""
    if style is None and os.environ.get(STYLE_ENV):
        style, flag = os.environ[STYLE_ENV], STYLE_ENV
    style = style or None
    if style is None:
        return None
    import matplotlib.style

    if Path(style).is_file() or style in matplotlib.style.available or style == "default":
        return style
    looks_like_path = os.sep in style or style.endswith(".mplstyle")
    why = "no such file" if looks_like_path else (f"not a file, nor a matplotlib style "
                                                  f"(known: {', '.join(sorted(matplotlib.style.available)[:6])}, ...)")
    raise SpecError([(flag, f"figure style {style!r}: {why}")])


def current_format() -> str:
    return _format.get() or check_format(None)


@contextlib.contextmanager
def figure_output(fmt: str | None = None, style: str | None = None) -> Iterator[str]:
    """Figures saved inside are ``fmt`` files drawn with ``style`` (see the module docstring)."""
    fmt, style = check_format(fmt), check_style(style)
    token = _format.set(fmt)
    try:
        if style is None:
            yield fmt
        else:
            import matplotlib.style

            with matplotlib.style.context(style):
                yield fmt
    finally:
        _format.reset(token)


def figure_path(path: Path) -> Path:
    """``path`` with the current format's suffix."""
    return Path(path).with_suffix("." + current_format())


_WEB_COPIES: dict[str, bytes] = {}  # pdf figure's path -> an svg of it, for index.html (a browser shows no pdf inline)
MAX_WEB_COPIES = 64


def save(fig, path: Path, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` in the current format; returns the path written. Vector formats get
    no creation date, so the same figure gives the same file. A pdf figure also leaves an svg copy in
    memory (:func:`web_copy`) for the page drawn in the same process."""
    out = figure_path(path)
    fmt = out.suffix[1:]
    metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt)
    fig.savefig(out, dpi=dpi, format=fmt, metadata=metadata)
    if fmt not in WEB_FORMATS:
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        while len(_WEB_COPIES) >= MAX_WEB_COPIES:
            _WEB_COPIES.pop(next(iter(_WEB_COPIES)))
        _WEB_COPIES[str(Path(out).resolve())] = buf.getvalue()
    return out


def web_copy(path: Path) -> bytes | None:
    """The svg copy :func:`save` kept of the pdf figure ``path`` (None: none kept, e.g. another process drew it)."""
    return _WEB_COPIES.get(str(Path(path).resolve()))


def find(folder: Path, stem: str) -> Path | None:
    """The figure ``stem`` in ``folder`` in whichever format it was written (png, svg, pdf)."""
    for fmt in FORMATS:
        p = Path(folder) / f"{stem}.{fmt}"
        if p.is_file():
            return p
    return None


def md_links(text: str) -> str:
    """Markdown image links ``](NAME.png)`` as the current format's files (``](NAME.svg)``)."""
    import re

    fmt = current_format()
    return text if fmt == "png" else re.sub(r"\]\(([^()\s]+)\.png\)", rf"](\1.{fmt})", text)

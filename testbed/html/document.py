"""The frame of a testbed HTML page: one self-contained file (inline style, figures as ``data:``
URIs, no script, no link to anything outside the file), written atomically."""

from __future__ import annotations

import base64
import html
import os
import threading
from pathlib import Path

MIME = {".png": "image/png", ".svg": "image/svg+xml"}

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1280px;
 padding:1rem 1.5rem 3rem;color:#1d1d1f;line-height:1.45}
h1{font-size:1.6rem;margin:.4rem 0 .2rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1.05rem;margin-top:1.4rem}
.meta{color:#555;margin:0 0 1rem}.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.4rem .8rem}
.live{background:#e3f2fd;border-left:4px solid #1565c0;padding:.6rem .9rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.2rem .45rem;text-align:right;white-space:nowrap}
th{background:#f3f4f6}td:first-child,th:first-child{text-align:left}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.85rem}code{background:#f3f4f6;padding:0 .2rem;border-radius:3px}
progress{width:24rem;height:1.1rem}nav a{margin-right:1rem}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:0 1.2rem;align-items:start}
"""


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def data_uri(path: Path) -> str | None:
    """``path`` (a png or svg file) as a ``data:`` URI; a pdf figure as the svg copy drawn with it
    (testbed.analysis.figures.web_copy), else None (a browser does not show a pdf in an image)."""
    mime = MIME.get(Path(path).suffix.lower())
    if mime is None:
        from testbed.analysis.figures import web_copy

        copy = web_copy(path)  # a pdf drawn in this process: its svg copy
        return None if copy is None else f"data:image/svg+xml;base64,{base64.b64encode(copy).decode('ascii')}"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"


def figure(path: Path | None, caption: str = "", alt: str = "") -> str:
    """A figure embedded in the page; a pdf figure without an svg copy is named (its file is beside the page)."""
    if path is None:
        return ""
    uri = data_uri(path)
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    if uri is None:
        return (f'<p class="note">Figure <code>{esc(Path(path).name)}</code> is a {esc(Path(path).suffix[1:])} '
                f"file beside this page (a browser shows only png and svg inline).</p>")
    return f'<figure><img src="{uri}" alt="{esc(alt or caption or Path(path).stem)}">{cap}</figure>'


def grid(*figures: str) -> str:
    """Figures side by side where the window is wide enough."""
    return f'<div class="figs">{"".join(figures)}</div>' if any(figures) else ""


def table(df, digits: int = 4) -> str:
    """A DataFrame as an HTML table (numbers to ``digits`` significant digits, NaN empty)."""
    import math

    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.{digits}g}"
        return "" if v is None else esc(v)

    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>"
                   for r in df.itertuples(index=False, name=None))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def page(title: str, body: str, *, refresh_s: float | None = None) -> str:
    """The whole document. ``refresh_s``: a live page, reloaded by the browser every so many seconds."""
    refresh = f'<meta http-equiv="refresh" content="{max(1, round(refresh_s))}">' if refresh_s else ""
    # nothing may be fetched: no external resource, and the policy says so to the browser too
    csp = ("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
           "style-src 'unsafe-inline'\">")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{csp}{refresh}'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary sibling and a rename: a reader (a browser
    reloading a live page) sees the old page or the new one, never half of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

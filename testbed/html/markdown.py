"""The Markdown testbed writes (``comparison.md``, ``table.md``, ``report.md``) as HTML: headings,
pipe tables, bullet lists, paragraphs, images on a line of their own (embedded from ``folder``),
inline code, bold and links (their text only: the page links to nothing)."""

from __future__ import annotations

import re
from pathlib import Path

from testbed.html.document import esc, figure

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^()\s]+)\)$")


def inline(text: str) -> str:
    out = esc(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\[([^\]]+)\]\([^()\s]+\)", r"\1", out)


def slug(text: str) -> str:
    """A heading's anchor: ``## Energy and JCT per policy`` -> ``energy-and-jct-per-policy``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(rows: list[str]) -> str:
    head, body = _cells(rows[0]), rows[2:] if len(rows) > 1 and set(rows[1].replace("|", "").strip()) <= set("-: ") else rows[1:]
    out = "<table><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
    out += "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(r)) + "</tr>" for r in body)
    return out + "</tbody></table>"


def to_html(text: str, folder: Path | None = None, *, shift: int = 0, skip_title: bool = False) -> str:
    """``text`` as HTML; images resolve in ``folder`` (an image not found there is named, not
    embedded); headings go ``shift`` levels down; ``skip_title`` drops a first ``# `` heading."""
    html: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            html.append("<p>" + inline(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i].rstrip()
        heading = re.match(r"^(#{1,6})\s+(.*)$", line)
        if not line.strip():
            flush()
        elif heading:
            flush()
            level = len(heading.group(1))
            if not (skip_title and level == 1 and not html):
                level = min(6, level + shift)
                html.append(f'<h{level} id="{slug(heading.group(2))}">{inline(heading.group(2))}</h{level}>')
        elif line.lstrip().startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(lines[i])
                i += 1
            html.append(_table(rows))
            continue
        elif re.match(r"^\s*[-*] ", line):
            flush()
            items = []
            while i < len(lines) and re.match(r"^\s*[-*] ", lines[i]):
                items.append(re.sub(r"^\s*[-*] ", "", lines[i]))
                i += 1
            html.append("<ul>" + "".join(f"<li>{inline(x)}</li>" for x in items) + "</ul>")
            continue
        elif _IMAGE.match(line.strip()):
            flush()
            m = _IMAGE.match(line.strip())
            path = Path(folder) / m.group("src") if folder is not None else None
            if path is not None and path.is_file() and path.resolve().parent == Path(folder).resolve():
                html.append(figure(path, alt=m.group("alt")))
            else:
                html.append(f'<p class="note">figure <code>{esc(m.group("src"))}</code> not found</p>')
        else:
            para.append(line.strip())
        i += 1
    flush()
    return "\n".join(html)

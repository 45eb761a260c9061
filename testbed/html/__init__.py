"""``index.html`` of a run's and a sweep's results directory: one self-contained page (figures
embedded, no script, nothing fetched from a network), rewritten every few seconds while an
emulated run goes (:mod:`testbed.html.live`).

- :mod:`testbed.html.document`: the page's frame (style, escaping, embedded figures, atomic write);
- :mod:`testbed.html.markdown`: the subset of Markdown testbed writes (comparison.md, table.md, report.md) as HTML;
- :mod:`testbed.html.site_map`: the sites on a map, migrations as arcs coloured by outcome;
- :mod:`testbed.html.timelines`: per-site timelines;
- :mod:`testbed.html.run_page` / :mod:`testbed.html.sweep_page`: the two pages;
- :mod:`testbed.html.live`: the live page of a run in progress.
"""

INDEX = "index.html"

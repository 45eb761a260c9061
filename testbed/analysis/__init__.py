"""Analysis of results: figures and tables computed from recorded runs (never imports live layers)."""

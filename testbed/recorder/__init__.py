"""Results on disk: ``results/RUN_ID/`` with a manifest, per-policy tables and summaries."""

"""What shows runs: the report, step pages, the live view, HTML and the Inspect export."""

"""Headless entry points: run with ``python -m headless.X`` or ``blender -b --python headless/X.py -- ARGS``."""

"""geometry_v1: the offline geometry judge's answers, read with dual_vqa_strict's rules (its answers are clean
letters and numbers, where the release's quirks never decide).

No VLM speaks it: it is the protocol of ``--judge geometry`` alone.
"""

from . import dual_vqa_strict

NAME = "geometry_v1"
VLM = False
"""Only the geometry judge speaks it."""
MAX_TOKENS = dual_vqa_strict.MAX_TOKENS
prompt = dual_vqa_strict.prompt
score = dual_vqa_strict.score
aggregate = dual_vqa_strict.aggregate

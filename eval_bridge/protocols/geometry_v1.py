"""geometry_v1: the offline geometry judge's answers, read with dual_vqa_v1's rules.

No VLM speaks it: it is the protocol of ``--judge geometry`` alone.
"""

from . import dual_vqa_v1

NAME = "geometry_v1"
VLM = False
"""Only the geometry judge speaks it."""
MAX_TOKENS = dual_vqa_v1.MAX_TOKENS
prompt = dual_vqa_v1.prompt
score = dual_vqa_v1.score
aggregate = dual_vqa_v1.aggregate

"""Judges checked against people: blinded human studies of BVB reconstructions and VGI videos.

``bvb human pack`` builds a study page (pack.py; its clips media.py, its template page/) and the
key that unblinds it (key.py), ``bvb human serve`` serves it and keeps the answers it is sent
(serve.py), and ``bvb human score`` unblinds the answers and measures the benchmark's automatic
scores against them (score.py on stats.py). No bpy.
"""

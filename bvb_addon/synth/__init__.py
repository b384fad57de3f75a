"""The synthetic indoor suite: procedurally planned rooms rendered by Blender, with exact answers.

``plan``, ``catalog``, ``geometry``, ``questions`` and ``oracle`` import no bpy; ``build_bl`` does
(import it explicitly). Entry point: ``bvb synth``.
"""

from .plan import DIFFICULTIES, make_plan, scene_seed

__all__ = ["DIFFICULTIES", "make_plan", "scene_seed"]

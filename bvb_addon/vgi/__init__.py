"""VGI-Bench procedure tasks built in Blender: plans, oracle programs, exact checkers."""

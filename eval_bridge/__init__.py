"""The BVB eval bridge: Dual VQA, Latent Similarity, Overall and reports. Imports no bpy."""

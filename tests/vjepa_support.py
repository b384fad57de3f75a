"""A tiny randomly initialised V-JEPA 2, built offline from a config and saved to a folder (loaded by path)."""

import json

PREPROCESSOR = {
    "video_processor_type": "VJEPA2VideoProcessor",
    "crop_size": {"height": 32, "width": 32},
    "size": {"shortest_edge": 36},
    "do_resize": True,
    "do_center_crop": True,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 2,
}


def build_tiny_vjepa2(folder, frames_per_clip=4):
    """Save a 2-layer, 32-wide V-JEPA 2 and its preprocessor config into folder; return folder."""
    import torch
    import transformers

    config = transformers.VJEPA2Config(
        crop_size=32,
        patch_size=16,
        tubelet_size=2,
        frames_per_clip=frames_per_clip,
        hidden_size=32,
        num_attention_heads=2,
        num_hidden_layers=2,
        mlp_ratio=2.0,
        pred_hidden_size=32,
        pred_num_attention_heads=2,
        pred_num_hidden_layers=1,
    )
    torch.manual_seed(0)
    transformers.VJEPA2Model(config).save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR))
    return folder

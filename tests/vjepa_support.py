"""Tiny V-JEPA encoders written by the tests, loaded offline by path.

build_tiny_remote_code: a snapshot folder in the shape of the release's encoder
(``apiantonio/vjepa2.1-vit-gigantic-384``): config.json whose ``auto_map`` names a modeling file
beside it, so ``AutoModel.from_pretrained(folder, trust_remote_code=True)`` runs that file; a
forward that takes ``pixel_values_videos`` (B, T, C, H, W) and ``skip_predictor`` and returns
``last_hidden_state`` (B, T/2 * h * w, D) in tubelet, row, column order; safetensors weights and a
V-JEPA 2.1 video processor config. No code of the port is copied: a Conv3d patch embedding and a
layer norm stand in for the ViT.

build_tiny_vjepa2: transformers' own VJEPA2Model, randomly initialised.
"""

import json
import textwrap

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

MODELING = textwrap.dedent(
    """
    from dataclasses import dataclass

    import torch
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.utils import ModelOutput


    class TinyVJEPA21Config(PretrainedConfig):
        model_type = "tiny_vjepa21"

        def __init__(self, hidden_size=32, patch_size=16, tubelet_size=2, crop_size=32, **kwargs):
            super().__init__(**kwargs)
            self.hidden_size, self.patch_size = hidden_size, patch_size
            self.tubelet_size, self.crop_size = tubelet_size, crop_size


    @dataclass
    class TinyOutput(ModelOutput):
        last_hidden_state: torch.Tensor = None


    class TinyVJEPA21Model(PreTrainedModel):
        config_class = TinyVJEPA21Config
        base_model_prefix = "tiny"

        def __init__(self, config):
            super().__init__(config)
            kernel = (config.tubelet_size, config.patch_size, config.patch_size)
            self.patch = torch.nn.Conv3d(3, config.hidden_size, kernel_size=kernel, stride=kernel)
            self.norm = torch.nn.LayerNorm(config.hidden_size)
            self.post_init()

        def _init_weights(self, module):
            if isinstance(module, torch.nn.Conv3d):
                torch.nn.init.normal_(module.weight, std=0.05)
                torch.nn.init.zeros_(module.bias)

        def forward(self, pixel_values_videos, skip_predictor=False, **kwargs):
            if not skip_predictor:
                raise ValueError("this stand-in has no predictor: call it with skip_predictor=True")
            x = pixel_values_videos.permute(0, 2, 1, 3, 4).to(self.patch.weight.dtype)
            return TinyOutput(last_hidden_state=self.norm(self.patch(x).flatten(2).transpose(1, 2)))
    """
)


def build_tiny_remote_code(folder, seed=0):
    """Write the remote-code snapshot into folder (created); returns folder."""
    import importlib.util

    import torch

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modeling_tiny_vjepa21.py").write_text(MODELING)
    spec = importlib.util.spec_from_file_location(f"tiny_vjepa21_{seed}", folder / "modeling_tiny_vjepa21.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    module.TinyVJEPA21Model(module.TinyVJEPA21Config()).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "modeling_tiny_vjepa21.TinyVJEPA21Config",
        "AutoModel": "modeling_tiny_vjepa21.TinyVJEPA21Model",
    }
    (folder / "config.json").write_text(json.dumps(config))
    preprocessor = {**PREPROCESSOR, "video_processor_type": "VJEPA21VideoProcessor"}
    (folder / "video_preprocessor_config.json").write_text(json.dumps(preprocessor))
    return folder


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

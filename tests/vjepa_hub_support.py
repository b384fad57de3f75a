"""A tiny local stand-in for Meta's vjepa2 torch-hub repository, written by the tests themselves.

Its hubconf.py has the release's V-JEPA 2.1 entry-point signature, ``vjepa2_1_vit_large_384(*,
pretrained=True, **kwargs)`` returning ``(encoder, predictor)``, with an encoder that takes
(B, C, T, H, W) clips in 16 px patches over 2-frame tubelets and returns (B, N, D) tokens; the
checkpoint keeps the encoder's weights under ``ema_encoder`` with ``module.backbone.`` prefixes,
as the release's .pt files do. No code of Meta's is copied here.
"""

import textwrap

HUBCONF = textwrap.dedent(
    """
    import torch

    dependencies = ["torch"]


    class TinyEncoder(torch.nn.Module):
        def __init__(self, num_frames=64, embed_dim=32):
            super().__init__()
            self.patch_size, self.tubelet_size, self.embed_dim = 16, 2, embed_dim
            self.num_frames = num_frames
            self.patch_embed = torch.nn.Conv3d(3, embed_dim, kernel_size=(2, 16, 16), stride=(2, 16, 16))
            self.norm = torch.nn.LayerNorm(embed_dim)

        def forward(self, x):
            tokens = self.patch_embed(x).flatten(2).transpose(1, 2)
            return self.norm(tokens)


    def vjepa2_1_vit_large_384(*, pretrained=True, **kwargs):
        if pretrained:
            raise RuntimeError("this stand-in has no download")
        return TinyEncoder(num_frames=kwargs.get("num_frames", 64)), None
    """
)


def write_hub_repo(folder, checkpoint_key="ema_encoder", seed=0):
    """Write hubconf.py into folder and a checkpoint beside it; returns (repo, checkpoint, encoder state)."""
    import importlib.util

    import torch

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hubconf.py").write_text(HUBCONF)
    spec = importlib.util.spec_from_file_location("tiny_hubconf", folder / "hubconf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    encoder, _ = module.vjepa2_1_vit_large_384(pretrained=False)
    state = {f"module.backbone.{k}": v for k, v in encoder.state_dict().items()}
    checkpoint = folder / "vjepa2_1_vitl_tiny.pt"
    torch.save({checkpoint_key: state, "predictor": {}, "epoch": 1}, checkpoint)
    return folder, checkpoint, encoder.state_dict()

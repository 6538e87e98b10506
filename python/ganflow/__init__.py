"""ganflow's Python side: read ganflow training checkpoints without ganflow.

    import ganflow.torch
    G = ganflow.torch.load("runs/dcgan_fashion-.../checkpoints/ckpt-00002000.safetensors")
    images = G(torch.randn(16, G.input_shape[0]))

ganflow.checkpoint  the checkpoint layout (parts, roles, layer tables, tensors): plain Python
ganflow.torch       a part's network as a torch.nn.Module (needs PyTorch)
ganflow.export      `python3 -m ganflow.export CKPT out.onnx` (what `ganflow export` runs)
"""

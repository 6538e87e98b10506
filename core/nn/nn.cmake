# nn engine sources of libganflow (tensors ops, layers, losses, optimisers, CPU backend).
target_sources(ganflow PRIVATE)

# Runtime sources of libganflow (rings, messages, graph, loader, Lua).
target_sources(ganflow PRIVATE)

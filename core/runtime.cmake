# Runtime sources of libganflow (rings, messages, graph, loader, Lua).
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ring.c
  ${CMAKE_CURRENT_LIST_DIR}/msg.c
  ${CMAKE_CURRENT_LIST_DIR}/depth.c
  ${CMAKE_CURRENT_LIST_DIR}/params.c
  ${CMAKE_CURRENT_LIST_DIR}/loader.c
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/lua.c)

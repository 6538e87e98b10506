# Runtime sources of libganflow (fences, rings, messages, graph, the plugin
# search path and stage loader, placement, run directory, Lua, the
# distributed world). MPI (Open MPI, Debian libopenmpi-dev) is linked
# privately: <mpi.h> never reaches a public
# header, and a process only initialises MPI when a launcher started it
# (core/dist.c).
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/atomics.c
  ${CMAKE_CURRENT_LIST_DIR}/ring.c
  ${CMAKE_CURRENT_LIST_DIR}/msg.c
  ${CMAKE_CURRENT_LIST_DIR}/depth.c
  ${CMAKE_CURRENT_LIST_DIR}/params.c
  ${CMAKE_CURRENT_LIST_DIR}/plugin_path.c
  ${CMAKE_CURRENT_LIST_DIR}/loader.c
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_run.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_agree.c
  ${CMAKE_CURRENT_LIST_DIR}/dist_status.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_stats.c
  ${CMAKE_CURRENT_LIST_DIR}/stage_api.c
  ${CMAKE_CURRENT_LIST_DIR}/placement.c
  ${CMAKE_CURRENT_LIST_DIR}/rundir.c
  ${CMAKE_CURRENT_LIST_DIR}/signals.c
  ${CMAKE_CURRENT_LIST_DIR}/lua.c
  ${CMAKE_CURRENT_LIST_DIR}/dist.c)
find_package(MPI REQUIRED COMPONENTS C)
target_link_libraries(ganflow PRIVATE MPI::MPI_C)

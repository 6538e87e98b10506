# Runtime sources of libganflow: fences, rings, messages, the depth
# controller, the graph (building, running, statistics, the runner's side
# of an agreed stop), the stage API, the stage loader, parameter checking
# and signals.
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ring.c
  ${CMAKE_CURRENT_LIST_DIR}/msg.c
  ${CMAKE_CURRENT_LIST_DIR}/depth.c
  ${CMAKE_CURRENT_LIST_DIR}/params.c
  ${CMAKE_CURRENT_LIST_DIR}/loader.c
  ${CMAKE_CURRENT_LIST_DIR}/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_stop.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_run.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_agree.c
  ${CMAKE_CURRENT_LIST_DIR}/graph_stats.c
  ${CMAKE_CURRENT_LIST_DIR}/stage_api.c
  ${CMAKE_CURRENT_LIST_DIR}/signals.c)

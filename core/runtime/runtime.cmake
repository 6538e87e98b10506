# Runtime sources of libganflow: fences, rings, messages, the depth
# controller, the deal table and worker-count controller of multi-worker
# stages, the graph (building, stopping, the runner's side of an agreed
# stop, worker counts, statistics, running), the stage API, the stage
# loader, parameter checking and signals. Uses only core/base.
set(gf_runtime_sources ring msg depth deal workers params loader graph graph_stop graph_agree graph_workers
  graph_stats stage_api graph_run signals)
list(TRANSFORM gf_runtime_sources REPLACE "(.+)" "${CMAKE_CURRENT_LIST_DIR}/\\1.c")
target_sources(ganflow PRIVATE ${gf_runtime_sources})

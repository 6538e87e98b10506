# Runtime tests: rings, message pools, depth controller, parameters, graphs,
# Lua pipelines, bad input through the `ganflow` command, and a stage built
# out of tree against an installed ganflow. Label "tsan": also run by the
# ThreadSanitizer build (scripts/test).

# ---- test stages (built into build/stages for the tests, benchmarks and the
# demo pipeline; never installed) ----
foreach(s count_source jitter check_sink collect)
  gf_add_stage(${s} NOINSTALL SOURCES ${CMAKE_CURRENT_LIST_DIR}/stages/${s}/${s}.c)
endforeach()
# Broken stages for the loader tests, outside the stage directory so that
# `ganflow stages` and the search path never meet them.
set(GF_BAD_STAGE_DIR ${CMAKE_BINARY_DIR}/tests/badstages)
gf_add_stage(bad_abi OUTPUT_DIR ${GF_BAD_STAGE_DIR} SOURCES ${CMAKE_CURRENT_LIST_DIR}/stages/bad_abi/bad_abi.c)
gf_add_stage(no_desc OUTPUT_DIR ${GF_BAD_STAGE_DIR} SOURCES ${CMAKE_CURRENT_LIST_DIR}/stages/no_desc/no_desc.c)

# ---- unit and graph tests ----
gf_add_test(test_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ring.c LABELS tsan runtime TIMEOUT 240)
gf_add_test(test_msg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_msg.c LABELS tsan runtime TIMEOUT 120)
gf_add_test(test_depth SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_depth.c LABELS tsan runtime TIMEOUT 60)
gf_add_test(test_params SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_params.c LABELS runtime TIMEOUT 60)
gf_add_test(test_graph SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_graph.c LABELS tsan runtime TIMEOUT 240)
gf_add_test(test_lua SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_lua.c LABELS runtime TIMEOUT 120)
# Adaptive worker counts: the controller, the deal table (threads), graphs.
gf_add_test(test_workers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_workers.c LABELS tsan runtime TIMEOUT 240)
# The same ring and graph tests with full fences on both sides instead of
# membarrier, and no spinning, so every wait goes through the futex path.
foreach(t test_ring test_graph)
  add_test(NAME ${t}_sleepy COMMAND ${t})
  set_tests_properties(${t}_sleepy PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77 LABELS "tsan;runtime"
    ENVIRONMENT "GANFLOW_MEMBARRIER=0;GANFLOW_SPIN_US=0;GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")
endforeach()
foreach(t test_graph test_lua test_workers)
  add_dependencies(${t} stage_count_source stage_jitter stage_check_sink stage_collect stage_bad_abi stage_no_desc)
endforeach()
target_compile_definitions(test_lua PRIVATE GF_BAD_STAGE_DIR="${GF_BAD_STAGE_DIR}")
target_compile_definitions(test_graph PRIVATE GF_BAD_STAGE_DIR="${GF_BAD_STAGE_DIR}")

# ---- the command: bad input, signals, exit codes ----
add_test(NAME test_badinput
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_badinput.sh $<TARGET_FILE:ganflow_cmd> ${GF_BAD_STAGE_DIR})
set_tests_properties(test_badinput PROPERTIES TIMEOUT 120 LABELS runtime
  ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")

# ---- the layers of core/: no cycle between files, no edge upwards ----
# (scripts/include-graph over the sources and this build's objects, and
# over fixture trees with a cycle that it must refuse)
add_test(NAME include_graph
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_include_graph.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(include_graph PROPERTIES TIMEOUT 120 LABELS runtime)

# ---- a stage built out of tree against an installed ganflow ----
add_test(NAME test_outoftree
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/outoftree/run.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_LIST_DIR}/outoftree)
set_tests_properties(test_outoftree PROPERTIES TIMEOUT 180 LABELS runtime
  ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")

# ---- data paths that can never make a batch (batch, label_shard) ----
gf_add_test(test_feasible SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_feasible.c LABELS runtime data TIMEOUT 60)
add_dependencies(test_feasible stage_lmdb_reader stage_jpeg_decode stage_batch stage_label_shard)

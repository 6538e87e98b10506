# Runtime benchmarks (tests/bench/run ring, tests/bench/run depth,
# tests/bench/run workers):
#   bench_ring     ring throughput and round trip against a mutex+condvar
#                  queue, per-message overhead of a 3-stage graph;
#   bench_depth    adaptive depth against fixed depths 1 and 64 under a
#                  bursty producer and a steady one;
#   bench_workers  workers = "auto" against the best fixed worker count for
#                  a consumer that needs k workers, k = 1 .. the cores.
# All use the runtime's test stages (count_source, jitter, check_sink).
foreach(b ring depth workers)
  add_executable(bench_${b} ${CMAKE_CURRENT_LIST_DIR}/bench_${b}.c)
  target_link_libraries(bench_${b} PRIVATE ganflow Threads::Threads m)
  set_target_properties(bench_${b} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
  add_dependencies(bench_${b} stage_count_source stage_jitter stage_check_sink)
endforeach()

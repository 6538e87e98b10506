# bench_evalstats: the statistics part of `ganflow eval` (FID, IS, KID,
# precision/recall over 10,000 x d features on 2 BLAS threads).
# Run with: tests/bench/run evalstats
add_executable(bench_evalstats ${CMAKE_CURRENT_LIST_DIR}/bench_evalstats.c)
target_link_libraries(bench_evalstats PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_evalstats PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)

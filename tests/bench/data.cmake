# Data-path benchmarks (tests/bench/run decode | reader | feed): each
# program makes its benchmark shards once under BUILD/bench-data/, measures
# its same-run baseline, prints a table and the final "NAME: METRIC=VALUE
# target=TARGET" line.
foreach(b decode reader feed crc32c)
  add_executable(bench_${b} ${CMAKE_CURRENT_LIST_DIR}/bench_${b}.c)
  target_link_libraries(bench_${b} PRIVATE ganflow ganflow_convert PkgConfig::TURBOJPEG)
  set_target_properties(bench_${b} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
  add_dependencies(bench_${b} stage_lmdb_reader stage_jpeg_decode stage_batch)
endforeach()

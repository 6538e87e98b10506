# Data at ImageNet scale (tests/bench/run scale): bench_scale builds its
# sets once under ~/.cache/ganflow/scale ($GF_SCALE_DIR), then measures open
# time, resident memory, records/s, class mix, exactness over parts and
# resume (see the program's opening comment).
add_executable(bench_scale ${CMAKE_CURRENT_LIST_DIR}/bench_scale.c)
target_link_libraries(bench_scale PRIVATE ganflow ganflow_convert PkgConfig::LMDB m)
set_target_properties(bench_scale PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
add_dependencies(bench_scale ganflow_cmd stage_lmdb_reader stage_jpeg_decode)

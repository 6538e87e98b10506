# nn engine benchmarks: tests/bench/run dcgan_step
add_executable(bench_dcgan_step ${CMAKE_CURRENT_LIST_DIR}/bench_dcgan_step.c)
target_link_libraries(bench_dcgan_step PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_dcgan_step PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run inception: FID Inception pool3 features vs PyTorch 1.13 CPU
add_executable(bench_inception ${CMAKE_CURRENT_LIST_DIR}/bench_inception.c)
target_link_libraries(bench_inception PRIVATE ganflow m)
set_target_properties(bench_inception PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)

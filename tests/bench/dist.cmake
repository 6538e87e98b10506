# Distributed benchmark: tests/bench/run scaling (tests/bench/scaling.sh)
# measures weak scaling 1 vs 2 ranks with the real pipelines; bench_scaling
# calibrates the alpha-beta model on this machine (under mpirun) and
# prints the model's predictions for 2 ranks here and 8-1024 GPUs.
find_package(MPI REQUIRED COMPONENTS C)
add_executable(bench_scaling ${CMAKE_CURRENT_LIST_DIR}/bench_scaling.c)
target_link_libraries(bench_scaling PRIVATE ganflow MPI::MPI_C m)
set_target_properties(bench_scaling PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)

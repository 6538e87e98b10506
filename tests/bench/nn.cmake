# nn engine benchmarks: tests/bench/run dcgan_step
add_executable(bench_dcgan_step ${CMAKE_CURRENT_LIST_DIR}/bench_dcgan_step.c)
target_link_libraries(bench_dcgan_step PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_dcgan_step PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run layers: backbone layers vs PyTorch (torch_layers.py)
add_executable(bench_layers ${CMAKE_CURRENT_LIST_DIR}/bench_layers.c)
target_link_libraries(bench_layers PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_layers PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run backbone_step: SNGAN/BigGAN iterations vs PyTorch (torch_backbones.py)
add_executable(bench_backbone_step ${CMAKE_CURRENT_LIST_DIR}/bench_backbone_step.c)
target_link_libraries(bench_backbone_step PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_backbone_step PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run attention: the self-attention layer against PyTorch's
add_executable(bench_attention ${CMAKE_CURRENT_LIST_DIR}/bench_attention.c)
target_link_libraries(bench_attention PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_attention PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run inception: FID Inception pool3 features vs PyTorch 1.13 CPU
add_executable(bench_inception ${CMAKE_CURRENT_LIST_DIR}/bench_inception.c)
target_link_libraries(bench_inception PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_inception PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)
# tests/bench/run r1: the D step with R1 (double backward) vs PyTorch's (torch_r1.py)
add_executable(bench_r1 ${CMAKE_CURRENT_LIST_DIR}/bench_r1.c)
target_link_libraries(bench_r1 PRIVATE ganflow PkgConfig::OPENBLAS m)
set_target_properties(bench_r1 PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bench)

# nn engine sources of libganflow (tensors ops, layers, losses, optimisers, CPU backend).
set(GF_NN_DIR ${CMAKE_CURRENT_LIST_DIR})
set(GF_NN_CPU_SOURCES
  ${GF_NN_DIR}/cpu/device_cpu.c
  ${GF_NN_DIR}/cpu/backend_cpu.c
  ${GF_NN_DIR}/cpu/team.c
  ${GF_NN_DIR}/cpu/ops_cpu.c
  ${GF_NN_DIR}/cpu/recipe_cpu.c
  ${GF_NN_DIR}/cpu/conv_cpu.c
  ${GF_NN_DIR}/cpu/winograd_cpu.c
  ${GF_NN_DIR}/cpu/bn_cpu.c
  ${GF_NN_DIR}/cpu/sn_cpu.c
  ${GF_NN_DIR}/cpu/augment_cpu.c
  ${GF_NN_DIR}/cpu/gemm_batched_cpu.c
  ${GF_NN_DIR}/cpu/dbwd_cpu.c
  ${GF_NN_DIR}/cpu/graph_cpu.c
  ${GF_NN_DIR}/cpu/sg2_cpu.c
  ${GF_NN_DIR}/cpu/ada_cpu.c
  ${GF_NN_DIR}/cpu/peak_cpu.c)
# One file per layer kind (layer_kind.h), listed in layers/registry.c.
set(GF_NN_LAYER_SOURCES
  ${GF_NN_DIR}/layers/registry.c
  ${GF_NN_DIR}/layers/sn.c
  ${GF_NN_DIR}/layers/eqlr.c
  ${GF_NN_DIR}/layers/linear.c
  ${GF_NN_DIR}/layers/conv.c
  ${GF_NN_DIR}/layers/tconv.c
  ${GF_NN_DIR}/layers/upsample.c
  ${GF_NN_DIR}/layers/bn.c
  ${GF_NN_DIR}/layers/activations.c
  ${GF_NN_DIR}/layers/dropout.c
  ${GF_NN_DIR}/layers/reshape.c
  ${GF_NN_DIR}/layers/embedding.c
  ${GF_NN_DIR}/layers/concat.c
  ${GF_NN_DIR}/layers/pool.c
  ${GF_NN_DIR}/layers/softmax.c
  ${GF_NN_DIR}/layers/add.c
  ${GF_NN_DIR}/layers/gsp.c
  ${GF_NN_DIR}/layers/split.c
  ${GF_NN_DIR}/layers/instancenorm.c
  ${GF_NN_DIR}/layers/cbn.c
  ${GF_NN_DIR}/layers/proj.c
  ${GF_NN_DIR}/layers/diffaugment.c
  ${GF_NN_DIR}/layers/attention.c
  ${GF_NN_DIR}/layers/mbstd.c
  ${GF_NN_DIR}/layers/fir.c
  ${GF_NN_DIR}/layers/bias_act.c
  ${GF_NN_DIR}/layers/noise.c
  ${GF_NN_DIR}/layers/const.c
  ${GF_NN_DIR}/layers/modconv.c
  ${GF_NN_DIR}/layers/norm2.c
  ${GF_NN_DIR}/layers/dot.c
  ${GF_NN_DIR}/layers/w_avg.c
  ${GF_NN_DIR}/layers/style_mix.c
  ${GF_NN_DIR}/layers/ada.c)
target_sources(ganflow PRIVATE
  ${GF_NN_DIR}/rng.c
  ${GF_NN_DIR}/safetensors.c
  ${GF_NN_DIR}/backend.c
  ${GF_NN_DIR}/layer_kind.c
  ${GF_NN_DIR}/net_build.c
  ${GF_NN_DIR}/net.c
  ${GF_NN_DIR}/net_dbwd.c
  ${GF_NN_LAYER_SOURCES}
  ${GF_NN_DIR}/loss.c
  ${GF_NN_DIR}/optim.c
  ${GF_NN_DIR}/ortho.c
  ${GF_NN_DIR}/net_ckpt.c
  ${GF_NN_CPU_SOURCES})

# The CPU kernels are written to be auto-vectorised (and cloned per ISA with
# target_clones): build them at -O3 outside Debug builds.
set_source_files_properties(${GF_NN_CPU_SOURCES} PROPERTIES
  COMPILE_OPTIONS "$<$<NOT:$<CONFIG:Debug>>:-O3>")

# Where gf_backend_open looks for backend_<name>.so besides GANFLOW_BACKEND_PATH.
target_compile_definitions(ganflow PRIVATE
  GF_BACKEND_BUILD_DIR="${CMAKE_BINARY_DIR}"
  GF_BACKEND_INSTALL_DIR="${CMAKE_INSTALL_FULL_LIBDIR}/ganflow")

# OpenBLAS for GEMMs (the CPU backend); libm for the kernels.
target_link_libraries(ganflow PRIVATE PkgConfig::OPENBLAS m)

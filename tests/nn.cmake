# nn engine tests: layers against finite differences and PyTorch references,
# losses, optimisers, Philox, safetensors, checkpoints, Lua backbones.
gf_add_test(test_nn_ref SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref.c LABELS nn TIMEOUT 120)
gf_add_test(test_nn_ref2 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref2.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref3 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref3.c LABELS nn TIMEOUT 120)
gf_add_test(test_nn_ref4 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref4.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_aug SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_aug.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ada SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ada.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref5 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref5.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref_incep SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref_incep.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_winograd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_winograd.c LABELS nn tsan TIMEOUT 120)
gf_add_test(test_nn_im2col SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_im2col.c LABELS nn tsan TIMEOUT 120)
gf_add_test(test_nn_gradcheck SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_gradcheck.c LABELS nn TIMEOUT 300)
gf_add_test(test_nn_dbwd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_dbwd.c LABELS nn TIMEOUT 300)
gf_add_test(test_nn_ref_dbwd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref_dbwd.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref_sg2 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref_sg2.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref_sg2net SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref_sg2net.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_ref_r3gan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ref_r3gan.c LABELS nn TIMEOUT 60)
# test_philox and test_nn_api drive the CPU backend's thread team with 1-4
# threads: the ThreadSanitizer build runs them too.
gf_add_test(test_philox SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_philox.c LABELS nn tsan TIMEOUT 60)
gf_add_test(test_safetensors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.c LABELS nn TIMEOUT 60)
gf_add_test(test_nn_backbones SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_backbones.c LABELS nn TIMEOUT 180)
gf_add_test(test_nn_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_api.c LABELS nn tsan TIMEOUT 60)
gf_add_test(test_nn_ckpt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_ckpt.c LABELS nn TIMEOUT 60)
# FLOPs against hand counts, the CPU's measured peak and its cache, the CUDA
# table of datasheet peaks (its plain-C file compiled in: no GPU needed).
gf_add_test(test_flops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_flops.c ${CMAKE_SOURCE_DIR}/core/nn/cuda/peak_cuda.c
  LABELS nn TIMEOUT 120)
# The GPU step machinery on the CPU backend's device check (graph_cpu.c):
# graph rules, replays, gf_stepgraph, gf_readback, gf_devmsg.
gf_add_test(test_nn_devcheck SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_devcheck.c LABELS nn train TIMEOUT 60)
gf_add_test(test_nn_coll SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_coll.c LABELS nn train TIMEOUT 60)
# A checkpoint written here, read from Python (json+struct, numpy, torch):
# /usr/bin/python3 where it exists (Debian's, with python3-numpy and maybe
# python3-torch), else python3. Skips (77) without numpy and torch.
add_test(NAME test_nn_ckpt_python
  COMMAND sh -c "py=/usr/bin/python3; [ -x $py ] || py=python3; \"$0\" --write \"$1\" && $py \"$2\" \"$1\""
          $<TARGET_FILE:test_nn_ckpt> ${CMAKE_CURRENT_BINARY_DIR}/nn_ckpt_python.safetensors
          ${CMAKE_CURRENT_LIST_DIR}/ref/check_ckpt.py)
set_tests_properties(test_nn_ckpt_python PROPERTIES SKIP_RETURN_CODE 77 LABELS nn TIMEOUT 120
  ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
# The recipe ops (clip_dev, LeCam, ADA's controller, penalty factors) against the host arithmetic they replace.
gf_add_test(test_nn_recipe SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nn_recipe.c LABELS nn train TIMEOUT 60)

# The PyTorch bridge (python/ganflow, `ganflow export`): each backbone of
# luaconf/backbones trained 3 steps, then rebuilt by ganflow.torch.load and
# compared with ganflow's own forward (G through `ganflow sample npy=`, the
# others through net_forward); the ONNX export checked with python3-onnx.
# Skipped (77) without python3-torch / python3-onnx or Fashion-MNIST.
add_executable(net_forward ${CMAKE_CURRENT_LIST_DIR}/bridge/net_forward.c)
target_link_libraries(net_forward PRIVATE ganflow)
set_target_properties(net_forward PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
foreach(c kinds dcgan cgan perclass classifier stylegan2 r3gan export errors damaged ema_parts)
  add_test(NAME bridge_${c} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bridge/test_bridge.sh ${c})
  set_tests_properties(bridge_${c} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS "bridge"
    ENVIRONMENT "GF_SOURCE_DIR=${CMAKE_SOURCE_DIR};GF_BINARY_DIR=${CMAKE_BINARY_DIR}")
endforeach()

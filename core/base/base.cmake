# base: the floor of libganflow (errors, logging, values and their JSON and
# Lua text forms, tensor descriptors, CRC-32C, atomics, the plugin search
# path). Uses nothing else in core/.
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/err.c
  ${CMAKE_CURRENT_LIST_DIR}/log.c
  ${CMAKE_CURRENT_LIST_DIR}/value.c
  ${CMAKE_CURRENT_LIST_DIR}/value_json.c
  ${CMAKE_CURRENT_LIST_DIR}/lua_value.c
  ${CMAKE_CURRENT_LIST_DIR}/crc32c.c
  ${CMAKE_CURRENT_LIST_DIR}/atomics.c
  ${CMAKE_CURRENT_LIST_DIR}/tensor.c
  ${CMAKE_CURRENT_LIST_DIR}/plugin_path.c)

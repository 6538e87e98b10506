# base: the floor of libganflow (errors, logging, values and their JSON and
# Lua text forms, tensor descriptors, CRC-32C, atomics, the plugin search
# path). Uses nothing else in core/.
set(gf_base_sources err log value value_json lua_value crc32c atomics tensor plugin_path)
list(TRANSFORM gf_base_sources REPLACE "(.+)" "${CMAKE_CURRENT_LIST_DIR}/\\1.c")
target_sources(ganflow PRIVATE ${gf_base_sources})

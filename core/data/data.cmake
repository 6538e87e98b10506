# The dataset engine of libganflow: the shard format (record headers, meta
# records), opening and reading datasets, writing them, epoch orders, the
# io_uring stream behind lmdb_reader, and record decoding (TurboJPEG).
# The converters and `ganflow dataset` that use it live in datasets/.
target_sources(ganflow PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/record.c
  ${CMAKE_CURRENT_LIST_DIR}/shard.c
  ${CMAKE_CURRENT_LIST_DIR}/writer.c
  ${CMAKE_CURRENT_LIST_DIR}/order.c
  ${CMAKE_CURRENT_LIST_DIR}/stream.c
  ${CMAKE_CURRENT_LIST_DIR}/decode.c
  ${CMAKE_CURRENT_LIST_DIR}/caffe.c)
target_link_libraries(ganflow PRIVATE
  PkgConfig::LMDB PkgConfig::URING PkgConfig::TURBOJPEG ZLIB::ZLIB)

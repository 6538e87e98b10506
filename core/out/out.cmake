# Outputs of libganflow: PNG files, sample grids, plots.
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/png.c ${CMAKE_CURRENT_LIST_DIR}/plot.c)
target_link_libraries(ganflow PRIVATE PkgConfig::PNG)

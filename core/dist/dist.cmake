# The distributed world of libganflow: MPI start and end, liveness, the
# agreed stop's messages, job status, placement of stages on ranks. MPI
# (Open MPI, Debian libopenmpi-dev) is linked privately: <mpi.h> never
# reaches a public header, and a process only initialises MPI when a
# launcher started it (dist.c).
target_sources(ganflow PRIVATE ${CMAKE_CURRENT_LIST_DIR}/dist.c ${CMAKE_CURRENT_LIST_DIR}/dist_status.c
  ${CMAKE_CURRENT_LIST_DIR}/placement.c)
find_package(MPI REQUIRED COMPONENTS C)
target_link_libraries(ganflow PRIVATE MPI::MPI_C)

-- perclass_mpi: pipelines/perclass_fashion.lua, which runs per-class
-- training in one process or across MPI ranks (rank 0 keeps the books):
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/perclass_mpi.lua steps=500
local gf = require "ganflow"
gf.variant("perclass_fashion.lua")

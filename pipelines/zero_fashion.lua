-- zero_fashion: pipelines/dp_fashion.lua with ZeRO-1 optimiser-state
-- sharding (mode=zero1; see there). Same options, e.g.
--   mpirun --allow-run-as-root --oversubscribe -np 2 ./build/ganflow run pipelines/zero_fashion.lua steps=500 clip=1.0
local gf = require "ganflow"
gf.variant("dp_fashion.lua", { mode = "zero1" })

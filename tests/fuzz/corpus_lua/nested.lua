local gf = require "ganflow"
local t = {}
for i = 1, 70 do t = { t } end
local g = gf.stage "g_step" { name = "g", net = { { "linear", 8, 16 }, { "relu" }, t, input_shape = { 8 } }, batch = 4 }
gf.run {}
gf.run {}

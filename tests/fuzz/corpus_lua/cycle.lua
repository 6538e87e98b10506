local gf = require "ganflow"
local a = gf.stage "jitter" { name = "a" }
local b = gf.stage "jitter" { name = "b" }
gf.connect(a.out, b.inp)
gf.connect(b.out, a.inp)
gf.run {}

-- ganflow_ext: pure-Lua helpers of the `ganflow` module.
--
-- core/lua.c builds the module's C functions (stage, connect, run, arg,
-- rank, world), then requires this file and calls the function it returns
-- with the module table, so whatever is assigned to `gf` here is part of
--   local gf = require "ganflow"
-- Add helpers (optimiser tables such as gf.adam{}, backbone shortcuts, ...)
-- as fields of `gf` inside the function below, each with a comment saying
-- what it returns. Do not `require "ganflow"` from this file: the module
-- is still being built when this runs.
return function(gf)
  --- gf.args(defaults) -> table
  -- A copy of `defaults` where every key can be overridden from the command
  -- line (`ganflow run p.lua key=value`), converted to the default's type
  -- (number, boolean or string), exactly like gf.arg(key, default).
  --   local opt = gf.args { n = 1000, lr = 2e-4, shuffle = true }
  function gf.args(defaults)
    local out = {}
    for k, v in pairs(defaults) do
      out[k] = gf.arg(k, v)
    end
    return out
  end

  --- gf.merge(base, over, ...) -> table
  -- A shallow copy of `base` with the keys of each further table laid on
  -- top, left to right: handy for per-pipeline tweaks of shared defaults.
  function gf.merge(base, ...)
    local out = {}
    for k, v in pairs(base or {}) do out[k] = v end
    for i = 1, select("#", ...) do
      for k, v in pairs(select(i, ...) or {}) do out[k] = v end
    end
    return out
  end

  --- gf.adam{lr =, betas = {b1, b2}, eps =, weight_decay =, decoupled =} -> table
  -- gf.sgd{lr =, momentum =, dampening =, nesterov =, weight_decay =} -> table
  -- gf.oadam{...as adam} -> table (optimistic Adam: 2 g_t - g_{t-1}, for DPOSG)
  -- Optimiser settings for the `opt` parameter of g_step and d_step: a
  -- plain table {"adam", lr = ...}; unknown keys are refused when the stage
  -- is created. Unset keys take PyTorch's defaults.
  local function optimiser(kind)
    return function(t)
      local o = { kind }
      for k, v in pairs(t or {}) do o[k] = v end
      return o
    end
  end
  gf.adam = optimiser("adam")
  gf.sgd = optimiser("sgd")
  gf.oadam = optimiser("oadam")
end

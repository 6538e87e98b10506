-- ganflow_ext: pure-Lua helpers of the `ganflow` module.
--
-- core/lua/lua.c builds the module's C functions (stage, connect, run, arg,
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
  -- Defaults that gf.variant lays over the next pipeline's gf.args.
  local variant = {}
  function gf.args(defaults)
    local out = {}
    for k, v in pairs(defaults) do
      if variant[k] ~= nil then v = variant[k] end
      out[k] = gf.arg(k, v)
    end
    return out
  end

  --- gf.variant(file, defaults) -> what the pipeline returns
  -- Runs the pipeline `file` (relative to the folder of the pipeline that
  -- `ganflow run` started)
  -- with `defaults` laid over the defaults its gf.args declares; the
  -- command line still wins. A named variant of a pipeline is then two
  -- lines (pipelines/zero_fashion.lua):
  --   local gf = require "ganflow"
  --   gf.variant("dp_fashion.lua", { mode = "zero1" })
  function gf.variant(file, defaults)
    local dir = (arg and arg[0] or ""):match("^(.*/)") or ""
    for k, v in pairs(defaults or {}) do variant[k] = v end
    return dofile(dir .. file)
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

  --- gf.cosine{ from =, to =, kimg =, warmup_from =, warmup_kimg =, hold_kimg = } -> table
  -- A schedule for a step stage's `schedule` table (docs/train.md "Schedules"):
  -- R3GAN's cosine_decay_with_warmup over the images seen, from `from` to `to`
  -- along half a cosine over `kimg` thousand images (after an optional linear
  -- warm-up from warmup_from over warmup_kimg, and a hold of `from` over
  -- hold_kimg), then `to`. E.g. R3GAN's CIFAR-10 learning rate:
  --   g = gf.stage "g_step" { ..., schedule = { lr = gf.cosine{ from = 2e-4, to = 5e-5, kimg = 20000 } } }
  function gf.cosine(t)
    t = t or {}
    local known = { from = true, to = true, kimg = true, warmup_from = true, warmup_kimg = true, hold_kimg = true }
    for k in pairs(t) do
      if not known[k] then error("gf.cosine: unknown key '" .. tostring(k) .. "'", 2) end
    end
    for _, k in ipairs { "from", "to", "kimg" } do
      if type(t[k]) ~= "number" then error("gf.cosine: " .. k .. " must be a number, got " .. tostring(t[k]), 2) end
    end
    local s = { kind = "cosine" }
    for k, v in pairs(t) do s[k] = v end
    return s
  end

  --- gf.scale{ global_batch =, lr =, rule =, base_world =, warmup =, max_batch =, world = } -> table
  -- ParaGAN's scaling manager for data-parallel runs (docs/dist.md).
  --   global_batch  images per step over all ranks (required)
  --   lr            the learning rate tuned at base_world ranks (required)
  --   rule          "linear": lr * world / base_world; "sqrt": lr * sqrt(world / base_world);
  --                 "none": lr unchanged (default "linear")
  --   base_world    the world size lr was tuned for (default 1)
  --   warmup        steps of linear warm-up from 0 to the scaled lr (default 0; pass the
  --                 result's warmup to the step stages' lr_warmup)
  --   max_batch     largest batch a rank may run at once: a larger per-rank batch is split
  --                 into `accumulate` micro-batches (gradient accumulation)
  --   world         defaults to gf.world()
  -- Returns { batch = micro-batch per rank, accumulate = micro-batches per step,
  -- per_rank = images per rank per step, global_batch, lr = scaled lr, warmup, world }.
  -- A world size that does not divide the global batch is an error naming both numbers.
  function gf.scale(t)
    t = t or {}
    local known = { global_batch = true, lr = true, rule = true, base_world = true, warmup = true,
                    max_batch = true, world = true }
    for k in pairs(t) do
      if not known[k] then error("gf.scale: unknown key '" .. tostring(k) .. "'", 2) end
    end
    local world = t.world or gf.world()
    local gb, lr = t.global_batch, t.lr
    if type(gb) ~= "number" or gb < 1 or gb ~= math.floor(gb) then
      error("gf.scale: global_batch must be a positive integer, got " .. tostring(gb), 2)
    end
    if type(lr) ~= "number" or lr <= 0 then error("gf.scale: lr must be a number > 0, got " .. tostring(lr), 2) end
    if gb % world ~= 0 then
      local lo, hi = gb - gb % world, gb - gb % world + world
      error(string.format("gf.scale: global_batch = %d is not divisible by the world size %d (%d ranks would " ..
                          "each take %.2f images); choose a multiple of %d, such as %s%d", gb, world, world,
                          gb / world, world, lo > 0 and (lo .. " or ") or "", hi), 2)
    end
    local per = gb // world
    local accumulate = 1
    if t.max_batch then
      local mb = t.max_batch
      if type(mb) ~= "number" or mb < 1 then error("gf.scale: max_batch must be >= 1", 2) end
      accumulate = math.ceil(per / mb)
      while per % accumulate ~= 0 do accumulate = accumulate + 1 end
    end
    local base = t.base_world or 1
    local rule = t.rule or "linear"
    local f
    if rule == "linear" then f = world / base
    elseif rule == "sqrt" then f = math.sqrt(world / base)
    elseif rule == "none" then f = 1
    else error("gf.scale: rule must be \"linear\", \"sqrt\" or \"none\", got " .. tostring(rule), 2) end
    local warmup = t.warmup or 0
    if type(warmup) ~= "number" or warmup < 0 or warmup ~= math.floor(warmup) then
      error("gf.scale: warmup must be an integer >= 0", 2)
    end
    return { batch = per // accumulate, accumulate = accumulate, per_rank = per, global_batch = gb,
             lr = lr * f, warmup = warmup, world = world }
  end

  --- gf.class_rank(c, classes) -> integer
  -- The rank that trains class c (0-based) in per-class training: round-robin,
  -- c % world, so with classes % world ~= 0 the first classes % world ranks
  -- take one class more. More ranks than classes is an error (a rank would
  -- have nothing to train).
  function gf.class_rank(c, classes)
    local world = gf.world()
    if world > classes then
      error(string.format("per-class training: %d ranks but only %d classes; every rank needs at least " ..
                          "one class (run with at most %d ranks)", world, classes, classes), 2)
    end
    return c % world
  end
end

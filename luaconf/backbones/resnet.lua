-- ResNet building blocks shared by the SNGAN and BigGAN backbones
-- (sngan.lua, biggan.lua): layer tables for the nn engine (docs/nn.md),
-- appended to a network table t. Every block names its layers after a
-- prefix so that its residual sum can refer to them; a block returns the
-- name of its output.
--
--   up(t, p, x, cin, cout, o)    G's block: norm, ReLU, nearest x2, conv 3x3, norm, ReLU, conv 3x3,
--                                plus the shortcut nearest x2, conv 1x1; norm = o.norm(C) layer
--                                (bn, cbn with classes, or cbn with cond)
--   down(t, p, x, cin, cout, o)  D's block: [ReLU], conv 3x3, ReLU, conv 3x3, [avgpool 2], plus the
--                                shortcut [conv 1x1 when cin ~= cout or down], [avgpool 2];
--                                o.first: no leading ReLU, shortcut pools before its conv
--                                (SNGAN's OptimizedDisBlock, BigGAN's first DBlock)
local M = {}

local function add(t, l) t[#t + 1] = l; return l end

function M.up(t, p, x, cin, cout, o)
  local sn = o.sn
  add(t, o.norm(cin, { input = x }))
  add(t, { "relu" })
  add(t, { "upsample", 2 })
  add(t, { "conv", cin, cout, 3, 1, 1, sn = sn, init = o.init })
  add(t, o.norm(cout, {}))
  add(t, { "relu" })
  add(t, { "conv", cout, cout, 3, 1, 1, sn = sn, init = o.init, name = p .. "_main" })
  add(t, { "upsample", 2, input = x, name = p .. "_up" })
  add(t, { "conv", cin, cout, 1, sn = sn, init = o.init, name = p .. "_short" })
  add(t, { "add", input = p .. "_main", with = p .. "_short", name = p })
  return p
end

function M.down(t, p, x, cin, cout, o)
  local sn, first = o.sn, o.first
  if first then
    add(t, { "conv", cin, cout, 3, 1, 1, sn = sn, init = o.init, input = x })
  else
    add(t, { "relu", input = x })
    add(t, { "conv", cin, cout, 3, 1, 1, sn = sn, init = o.init })
  end
  add(t, { "relu" })
  add(t, { "conv", cout, cout, 3, 1, 1, sn = sn, init = o.init, name = (not o.down) and (p .. "_main") or nil })
  if o.down then add(t, { "avgpool", 2, name = p .. "_main" }) end
  local short = x
  if first then
    -- pool, then the 1x1 conv (cheaper: a quarter of the positions)
    if o.down then add(t, { "avgpool", 2, input = x, name = p .. "_pool" }); short = p .. "_pool" end
    add(t, { "conv", cin, cout, 1, sn = sn, init = o.init, input = short, name = p .. "_short" })
    short = p .. "_short"
  elseif cin ~= cout or o.down then
    add(t, { "conv", cin, cout, 1, sn = sn, init = o.init, input = x, name = p .. "_sconv" })
    short = p .. "_sconv"
    if o.down then add(t, { "avgpool", 2, name = p .. "_short" }); short = p .. "_short" end
  end
  add(t, { "add", input = p .. "_main", with = short, name = p })
  return p
end

-- The discriminator head: ReLU, global sum pooling, a linear to one output,
-- plus the projection of the class embedding when classes > 0.
function M.head(t, x, ch, classes, sn, init)
  add(t, { "relu", input = x })
  add(t, { "gsp", name = "h" })
  add(t, { "linear", ch, 1, sn = sn, init = init })
  if classes and classes > 0 then add(t, { "proj", classes, ch, with = "h", sn = sn }) end
  return t
end

function M.check(o, known, what)
  for k in pairs(o) do
    if not known[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
end

return M

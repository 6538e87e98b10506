-- SNGAN backbones (Miyato et al. 2018, "Spectral Normalization for
-- Generative Adversarial Networks", appendix B: the ResNet G and D), with
-- the projection discriminator of Miyato & Koyama 2018 and categorical
-- conditional batch norm in G for class-conditional models:
--
--   local sngan = require "backbones.sngan"
--   G = sngan.G{ size = 32, ch = 256, z = 128, channels = 3, classes = 0 }
--   D = sngan.D{ size = 32, ch = 128, channels = 3, classes = 0 }
--
-- size 32 (the CIFAR config): G 4x4 -> 3 up-blocks of ch channels -> BN,
-- ReLU, conv 3x3, tanh; D an optimized down-block, a down-block and two
-- plain blocks of ch channels, ReLU, global sum pooling, linear (plus the
-- projection). size 64 / 128 (the ImageNet configs): G channels ch x
-- {16, 8, 4, 2, 1} / {16, 16, 8, 4, 2, 1} from 4x4, D ch x {1, 2, 4, 8, 16}
-- / {1, 2, 4, 8, 16, 16}, every D block down-sampling but the last.
-- Spectral norm on every D layer (sn = false turns it off); G has none,
-- as in the paper (sn = true adds it). attention = R (a resolution, e.g.
-- 32 at size 64) adds SAGAN's self-attention after G's block that outputs
-- RxR and after D's first block that outputs RxR: SAGAN is sngan with attention.
-- augment = "color,translation,cutout" puts DiffAugment first in D.
--
-- The papers' widths are GPU-sized (G ch 256, D ch 128 at 32x32: tens of
-- GFLOP per image per iteration); the CPU pipelines use ch = 32 / 32.
local rn = require "backbones.resnet"
local M = {}

local G_OPTS = { size = true, ch = true, z = true, channels = true, classes = true, init = true, sn = true,
                 attention = true }
local D_OPTS = { size = true, ch = true, channels = true, classes = true, init = true, sn = true,
                 attention = true, augment = true }

local function widths(size, ch, g)
  if size == 32 then return g and { ch, ch, ch, ch } or { 3, ch, ch, ch, ch } end
  if size == 64 then return g and { 16 * ch, 8 * ch, 4 * ch, 2 * ch, ch } or { 3, ch, 2 * ch, 4 * ch, 8 * ch, 16 * ch } end
  if size == 128 then
    return g and { 16 * ch, 16 * ch, 8 * ch, 4 * ch, 2 * ch, ch } or { 3, ch, 2 * ch, 4 * ch, 8 * ch, 16 * ch, 16 * ch }
  end
  error("sngan: size must be 32, 64 or 128, got " .. tostring(size), 3)
end

function M.G(o)
  o = o or {}
  rn.check(o, G_OPTS, "sngan.G")
  local size, z, channels, classes = o.size or 32, o.z or 128, o.channels or 3, o.classes or 0
  local ch = o.ch or (size == 32 and 256 or 64)
  local w = widths(size, ch, true)
  local norm = function(c, extra)
    local l = classes > 0 and { "cbn", c, classes = classes } or { "bn", c }
    for k, v in pairs(extra) do l[k] = v end
    return l
  end
  local t = { input_shape = { z }, classes = classes > 0 and classes or nil, init = o.init }
  t[#t + 1] = { "linear", z, w[1] * 16, sn = o.sn }
  t[#t + 1] = { "reshape", w[1], 4, 4, name = "h0" }
  local x, res = "h0", 4
  for i = 1, #w - 1 do
    x = rn.up(t, "g" .. i, x, w[i], w[i + 1], { norm = norm, sn = o.sn })
    res = res * 2
    if o.attention == res then
      t[#t + 1] = { "attention", w[i + 1], sn = o.sn, input = x, name = "attn" }
      x = "attn"
    end
  end
  t[#t + 1] = { "bn", w[#w], input = x }
  t[#t + 1] = { "relu" }
  t[#t + 1] = { "conv", w[#w], channels, 3, 1, 1, sn = o.sn }
  t[#t + 1] = { "tanh" }
  return t
end

function M.D(o)
  o = o or {}
  rn.check(o, D_OPTS, "sngan.D")
  local size, channels, classes = o.size or 32, o.channels or 3, o.classes or 0
  local ch = o.ch or (size == 32 and 128 or 64)
  local sn = o.sn ~= false
  local w = widths(size, ch, false)
  local t = { input_shape = { channels, size, size }, classes = classes > 0 and classes or nil, init = o.init }
  local x = "x"
  if o.augment then
    t[#t + 1] = { "diffaugment", o.augment, name = "aug" }
    x = "aug"
  end
  -- size 32: an optimized block (3 -> ch, 32 -> 16), a down-block, two plain
  -- blocks; 64 / 128: every block down-samples but the last
  local downs = {}
  for i = 1, #w - 1 do downs[i] = size == 32 and i <= 2 or (size ~= 32 and i < #w - 1) end
  local cin, res, attn = channels, size, false
  for i = 1, #w - 1 do
    x = rn.down(t, "d" .. i, x, cin, w[i + 1], { sn = sn, first = i == 1, down = downs[i] })
    if downs[i] then res = res // 2 end
    cin = w[i + 1]
    if o.attention == res and not attn then
      t[#t + 1] = { "attention", cin, sn = sn, input = x, name = "attn" }
      x, attn = "attn", true
    end
  end
  rn.head(t, x, w[#w], classes, sn)
  return t
end

return M

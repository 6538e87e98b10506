-- R3GAN backbones ("The GAN is dead; long live the GAN! A Modern GAN
-- Baseline", Huang, Gokaslan, Kuleshov, Tompkin, NeurIPS 2024), layer for
-- layer the networks of the authors' R3GAN/Networks.py, composed of
-- existing kinds (docs/nn.md "R3GAN's networks"):
--
--   local r3 = require "backbones.r3gan"
--   G = r3.G{ size = 32, channels = 3, z = 64, widths = {768, 768, 768, 768}, cardinality = {96, 96, 96, 96},
--             blocks = {2, 2, 2, 2}, expansion = 2, classes = 0 }
--   D = r3.D{ size = 32, channels = 3, widths = ..., cardinality = ..., blocks = ..., classes = 0 }
--
-- widths, cardinality and blocks are per stage, from 4x4 up to the image
-- size, for both networks (D runs its stages from the image size down, as
-- R3GAN's train.py hands it the reversed lists); a single number stands
-- for every stage. The defaults are the authors' CIFAR-10 configuration
-- (their preset CIFAR10: widths 768, cardinality 96, 2 blocks per stage,
-- z 64, expansion 2; conditional with a G embedding of z's size and a D
-- embedding of the 4x4 width).
--
-- A stage's residual block (R3GAN's ResidualBlock, no normalisation):
-- 1x1 conv C -> eC, bias + LeakyReLU 0.2, grouped kxk conv eC -> eC with
-- `cardinality` groups, bias + LeakyReLU 0.2, 1x1 conv eC -> C, added to
-- the block's input (bias_act with gain 1: R3GAN's BiasedActivation).
--
-- G: [the class embedding (an embedding of the label, R3GAN's bias-free
-- linear map of the one-hot y) concatenated after z], the generative
-- basis (a bias-free linear map of z to the 4x4 width, one value per
-- channel, scaling a learned 4x4 image per channel: a depthwise 4x4
-- transposed convolution of the (C, 1, 1) map), the 4x4 stage's blocks,
-- then per resolution an up layer ([1x1 conv where the width changes],
-- then the interpolative x2 upsampling with the [1, 2, 1] filter: its
-- 4-tap form [1, 3, 3, 1], the fir kind) and the stage's blocks; a 1x1
-- conv to the image (no output activation; out = "tanh" appends a tanh, a
-- departure from the authors' G: the pixels stay in [-1, 1], where a linear
-- output runs far outside them on mostly-black images such as Fashion-MNIST).
--
-- D: [ada], a 1x1 conv from the image, per resolution down to 8x8 the
-- stage's blocks and a down layer (the x2 interpolative downsampling,
-- then [a 1x1 conv where the width changes]), the 4x4 stage's blocks and
-- the discriminative basis (a depthwise 4x4 conv to (C, 1, 1), flattened,
-- then a bias-free linear map to 1, or to `embed` values when
-- conditional); conditional: <basis, embedding(y)> (the dot kind),
-- R3GAN's projection. ada = "bgc" puts StyleGAN2-ADA's augmentation first
-- ({"ada", "bgc", p = ada_p, name = "ada"}).
--
-- Initialisation (init = "msr": R3GAN's MSRInitializer, N(0, gain^2 /
-- fan_in), zero biases): gain 1 except the blocks' first two convs,
-- sqrt(2 / (1 + 0.2^2)) * V^(-1/4) with V the total number of blocks of
-- the network (R3GAN's variance scaling: 3 linear layers a block), and
-- their last 1x1, gain 0 (each block starts as the identity); the basis
-- images N(0, 1) (gain 4 on the depthwise transposed conv's fan-in 16);
-- D's class embedding gain 1/sqrt(embed).
local M = {}

local G_OPTS = { size = true, channels = true, z = true, widths = true, cardinality = true, blocks = true,
                 expansion = true, kernel = true, classes = true, embed = true, out = true }
local D_OPTS = { size = true, channels = true, widths = true, cardinality = true, blocks = true, expansion = true,
                 kernel = true, classes = true, embed = true, ada = true, ada_p = true }

local function check(o, known, what)
  for k in pairs(o) do
    if not known[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
end

-- the resolutions 4, 8, ..., size
local function resolutions(size, what)
  local r, s = { 4 }, 4
  while s < size do s = s * 2; r[#r + 1] = s end
  if s ~= size then error(what .. ": size must be 4 times a power of 2, got " .. tostring(size), 3) end
  return r
end

-- a per-stage option: a list with one value per stage, or one number for all
local function per_stage(v, def, n, key, what)
  v = v or def
  if type(v) == "number" then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if type(v) ~= "table" or #v ~= n then
    error(what .. ": " .. key .. " must be a number or a list of " .. n .. " (one per stage from 4x4), got " ..
          (type(v) == "table" and #v .. " values" or type(v)), 3)
  end
  return v
end

-- the stages of o: resolutions and widths, cardinality, blocks per stage
local function stages(o, what)
  local res = resolutions(o.size or 32, what)
  local n = #res
  local s = { res = res, n = n, widths = per_stage(o.widths, 768, n, "widths", what),
              card = per_stage(o.cardinality, 96, n, "cardinality", what), blocks = per_stage(o.blocks, 2, n, "blocks", what),
              e = o.expansion or 2, k = o.kernel or 3 }
  s.total = 0
  for i = 1, n do
    if (s.widths[i] * s.e) % s.card[i] ~= 0 then
      error(string.format("%s: cardinality %d does not divide the %d expanded channels of the %dx%d stage", what,
                          s.card[i], s.widths[i] * s.e, res[i], res[i]), 3)
    end
    s.total = s.total + s.blocks[i]
  end
  if s.total < 1 then error(what .. ": the network needs at least one block", 3) end
  -- R3GAN's variance scaling: BiasedActivation's gain sqrt(2 / (1 + 0.2^2))
  -- times V^(-1 / (2 L - 2)) with L = 3 linear layers a block
  s.gain = math.sqrt(2 / (1 + 0.2 ^ 2)) * s.total ^ (-1 / 4)
  return s
end

local function add(t, layer) t[#t + 1] = layer end

-- the residual blocks of stage i, named p_b<j>, from node `from`; returns the last node
local function blocks(t, s, i, p, from)
  local c, ec = s.widths[i], s.widths[i] * s.e
  for j = 0, s.blocks[i] - 1 do
    local b = p .. "_b" .. j
    add(t, { "conv", c, ec, 1, bias = false, init_gain = s.gain, input = from, name = b .. "_l1" })
    add(t, { "bias_act", ec, gain = 1, name = b .. "_a1" })
    add(t, { "conv", ec, ec, s.k, 1, (s.k - 1) // 2, groups = s.card[i], bias = false, init_gain = s.gain,
             name = b .. "_l2" })
    add(t, { "bias_act", ec, gain = 1, name = b .. "_a2" })
    add(t, { "conv", ec, c, 1, bias = false, init_gain = 0, name = b .. "_l3" })
    add(t, { "add", with = from, name = b })
    from = b
  end
  return from
end

function M.G(o)
  o = o or {}
  check(o, G_OPTS, "r3gan.G")
  local s = stages(o, "r3gan.G")
  local z, classes = o.z or 64, o.classes or 0
  local t = { input_shape = { z }, init = "msr" }
  local zin, zdim = "x", z
  if classes > 0 then
    local e = o.embed or z
    t.classes = classes
    add(t, { "embedding", classes, e, name = "embed" })
    add(t, { "concat", input = "x", with = "embed", name = "zc" })
    zin, zdim = "zc", z + e
  end
  local w = s.widths[1]
  add(t, { "linear", zdim, w, bias = false, input = zin, name = "s4_basis_lin" })
  add(t, { "reshape", w, 1, 1 })
  add(t, { "tconv", w, w, 4, groups = w, bias = false, init_gain = 4, name = "s4_basis" })
  local from = blocks(t, s, 1, "s4", "s4_basis")
  for i = 2, s.n do
    local p = "s" .. s.res[i]
    if s.widths[i] ~= s.widths[i - 1] then
      add(t, { "conv", s.widths[i - 1], s.widths[i], 1, bias = false, input = from, name = p .. "_up_conv" })
      from = p .. "_up_conv"
    end
    add(t, { "fir", up = 2, input = from, name = p .. "_up" })
    from = blocks(t, s, i, p, p .. "_up")
  end
  add(t, { "conv", s.widths[s.n], o.channels or 3, 1, bias = false, input = from, name = "out" })
  if o.out == "tanh" then
    add(t, { "tanh", name = "out_tanh" })
  elseif o.out ~= nil and o.out ~= "linear" then
    error("r3gan.G: out = '" .. tostring(o.out) .. "': expected \"linear\" (the authors' G) or \"tanh\"", 2)
  end
  return t
end

function M.D(o)
  o = o or {}
  check(o, D_OPTS, "r3gan.D")
  local s = stages(o, "r3gan.D")
  local size, channels, classes = s.res[s.n], o.channels or 3, o.classes or 0
  local t = { input_shape = { channels, size, size }, init = "msr" }
  if o.ada then
    add(t, { "ada", o.ada, p = o.ada_p or 0, name = "ada" })
  end
  add(t, { "conv", channels, s.widths[s.n], 1, bias = false, name = "in" })
  local from = "in"
  for i = s.n, 2, -1 do
    local p = "s" .. s.res[i]
    from = blocks(t, s, i, p, from)
    add(t, { "fir", down = 2, input = from, name = p .. "_down" })
    from = p .. "_down"
    if s.widths[i] ~= s.widths[i - 1] then
      add(t, { "conv", s.widths[i], s.widths[i - 1], 1, bias = false, name = p .. "_down_conv" })
      from = p .. "_down_conv"
    end
  end
  from = blocks(t, s, 1, "s4", from)
  local w = s.widths[1]
  local out = classes > 0 and (o.embed or w) or 1
  add(t, { "conv", w, w, 4, groups = w, bias = false, input = from, name = "basis" })
  add(t, { "flatten" })
  add(t, { "linear", w, out, bias = false, name = "basis_lin" })
  if classes > 0 then
    t.classes = classes
    add(t, { "embedding", classes, out, init_gain = 1 / math.sqrt(out), name = "embed" })
    add(t, { "dot", input = "basis_lin", with = "embed", name = "proj" })
  end
  return t
end

return M

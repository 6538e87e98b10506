-- pix2pix (Isola et al. 2017, "Image-to-Image Translation with Conditional
-- Adversarial Networks"): the U-Net generator and the PatchGAN
-- discriminator, layer for layer the UnetGenerator and NLayerDiscriminator
-- of the authors' PyTorch code (the "unet_256" and "basic" defaults).
-- Each function returns a plain layer table for the nn engine (docs/nn.md).
--
--   local p2p = require "backbones.pix2pix"
--   G = p2p.G{ size = 256, channels = 3 }          -- A (3, 256, 256) -> B (3, 256, 256)
--   D = p2p.D{ size = 256, channels = 3 }          -- (A, B) concatenated: 6 channels -> (1, 30, 30)
--
-- G options: size (a power of two >= 4, 256), channels (of A, 3), out (of B,
-- default channels), ngf (64), depth (number of stride-2 downsamplings,
-- default log2(size): 8 at 256, 5 at 32, the bottleneck is 1 x 1), norm
-- ("batch" or "instance"), dropout (0.5; 0 disables), dropout_blocks (3:
-- decoder blocks 2 .. 1 + dropout_blocks counted from the bottleneck get the
-- dropout, the three 512-channel blocks of the reference at 256; the same
-- blocks at smaller sizes so the noise is there at every size), init
-- ("dcgan" = N(0, 0.02) as the reference's init_type "normal"; "torch").
--
-- D options: size (256), channels (of A, 3), out (of B, default channels),
-- ndf (64), n_layers (3: a 70 x 70 receptive field), norm, init.
--
-- Encoder block i (1 .. depth): LReLU 0.2 (not for i = 1) -> conv 4x4 s2 p1
-- -> norm (not for i = 1 and not at the bottleneck). Decoder block i: ReLU
-- -> transposed conv 4x4 s2 p1 -> norm (-> dropout) -> concatenated after
-- the skip of encoder block i - 1; the last decoder block ends in a tanh.
-- The skip is LReLU(encoder output): the reference's LeakyReLU runs in
-- place on the tensor it later concatenates, so that is what its U-Net
-- concatenates, and what this one does. Channels: ngf * min(2^(i-1), 8).
-- Convolutions have no bias with batchnorm (the reference's use_bias =
-- norm is instance norm, for every conv but D's first and last and G's
-- last); instance norm is InstanceNorm2d
-- without affine parameters or running statistics, as the reference's.
local M = {}

local function check(o, known, what)
  for k in pairs(o) do
    if not known[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
end

local function norm_layer(norm, c)
  if norm == "batch" then return { "bn", c } end
  return { "instancenorm", c }
end

local function check_norm(norm, what)
  if norm ~= "batch" and norm ~= "instance" then
    error(what .. ": norm must be \"batch\" or \"instance\", not " .. tostring(norm), 3)
  end
end

local function log2(n)
  local d = 0
  while n > 1 do
    if n % 2 ~= 0 then return nil end
    n = n // 2
    d = d + 1
  end
  return d
end

local G_OPTS = { size = true, channels = true, out = true, ngf = true, depth = true, norm = true, dropout = true,
                 dropout_blocks = true, init = true }

function M.G(o)
  o = o or {}
  check(o, G_OPTS, "pix2pix G")
  local size, cin = o.size or 256, o.channels or 3
  local cout, ngf, norm = o.out or cin, o.ngf or 64, o.norm or "batch"
  local p, ndrop = o.dropout or 0.5, o.dropout_blocks or 3
  check_norm(norm, "pix2pix G")
  local full = log2(size)
  if not full or full < 2 then error("pix2pix G: size must be a power of two >= 4, not " .. tostring(size), 2) end
  local depth = o.depth or full
  if depth < 2 or depth > full then
    error("pix2pix G: depth must be 2 .. " .. full .. " at size " .. size .. ", not " .. tostring(depth), 2)
  end
  local bias = norm == "instance"
  local function ch(i) return ngf * math.min(2 ^ (i - 1), 8) // 1 end
  local t = { input_shape = { cin, size, size }, init = o.init or "dcgan" }
  local function add(l) t[#t + 1] = l end
  -- encoder
  add { "conv", cin, ch(1), 4, 2, 1, bias = bias, name = "e1" }
  for i = 2, depth do
    add { "lrelu", 0.2, name = "s" .. (i - 1) }          -- also the skip of encoder block i - 1
    local inner = i == depth
    add { "conv", ch(i - 1), ch(i), 4, 2, 1, bias = bias, name = inner and "e" .. i or nil }
    if not inner then
      local n = norm_layer(norm, ch(i))
      n.name = "e" .. i
      add(n)
    end
  end
  -- decoder: block i undoes encoder block i, from the bottleneck up
  for i = depth, 2, -1 do
    local cin_up = i == depth and ch(i) or 2 * ch(i)
    add { "relu" }
    add { "tconv", cin_up, ch(i - 1), 4, 2, 1, bias = bias }
    add(norm_layer(norm, ch(i - 1)))
    local k = depth - i + 1                               -- decoder block number from the bottleneck
    if p > 0 and k >= 2 and k <= 1 + ndrop then add { "dropout", p } end
    add { "concat", input = "s" .. (i - 1), with = #t }
  end
  add { "relu" }
  add { "tconv", 2 * ch(1), cout, 4, 2, 1 }
  add { "tanh" }
  return t
end

local D_OPTS = { size = true, channels = true, out = true, ndf = true, n_layers = true, norm = true, init = true }

function M.D(o)
  o = o or {}
  check(o, D_OPTS, "pix2pix D")
  local size, cin = o.size or 256, o.channels or 3
  local cout, ndf, nl, norm = o.out or cin, o.ndf or 64, o.n_layers or 3, o.norm or "batch"
  check_norm(norm, "pix2pix D")
  if nl < 0 then error("pix2pix D: n_layers must be >= 0", 2) end
  local bias = norm == "instance"
  local t = { input_shape = { cin + cout, size, size }, init = o.init or "dcgan" }
  local function add(l) t[#t + 1] = l end
  add { "conv", cin + cout, ndf, 4, 2, 1 }
  add { "lrelu", 0.2 }
  local mult = 1
  for n = 1, nl do
    local prev = mult
    mult = math.min(2 ^ n, 8) // 1
    add { "conv", ndf * prev, ndf * mult, 4, n < nl and 2 or 1, 1, bias = bias }
    add(norm_layer(norm, ndf * mult))
    add { "lrelu", 0.2 }
  end
  add { "conv", ndf * mult, 1, 4, 1, 1 }
  return t
end

-- Receptive field of D (input pixels one output sees): 70 at n_layers =
-- 3, 34 at 2, 142 at 4. Backwards from the output: two 4x4 stride-1
-- convolutions, then n_layers 4x4 stride-2 ones.
function M.receptive_field(n_layers)
  local r = 7
  for _ = 1, n_layers or 3 do r = (r - 1) * 2 + 4 end
  return r
end

return M

-- DC-GAN and DC-CGAN backbones of "Scalable Balanced Training of
-- Conditional GANs" (Lupo Pasini et al.): tables 1-2 (G, D) and 3-4
-- (CG, CD). Each function returns a plain layer table for the nn engine
-- (docs/nn.md); layer by layer the same networks as
-- tests/bench/torch_dcgan.py (the benchmarks' PyTorch peer).
--
--   local dcgan = require "backbones.dcgan"
--   G = dcgan.G{ z = 100, size = 32, channels = 1 }
--   D = dcgan.D{ size = 32, channels = 1 }
--   CG = dcgan.CG{ z = 100, size = 32, channels = 1, classes = 10 }
--   CD = dcgan.CD{ size = 32, channels = 1, classes = 10 }
--
-- Options: z (noise size, 100), size (image side, a multiple of 4 for G and
-- of 16 for D, 32), channels (1), classes (10, conditional models), embed
-- (label embedding size of CG, default = classes: 100 + 10 = 110 inputs),
-- init ("torch" = PyTorch defaults as the peer; "dcgan" = N(0, 0.02)),
-- sigmoid (D, CD: end with a sigmoid, true; false gives logits for
-- bce_logits or hinge losses, and the critic of loss = "wgan"), dropout (D,
-- CD: Dropout2d probability, 0.25), bn (D, CD: the batch norms of blocks
-- 2-4, true; false drops them, as WGAN-GP's critic: its penalty is on each
-- sample's gradient, which batch statistics couple across the batch), ada
-- (D: StyleGAN2-ADA's augmentation first, e.g. "bgc": the layer
-- {"ada", "bgc", p = ada_p, name = "ada"}, whose p d_step adjusts;
-- docs/train.md "ADA"), ada_p (its p at the start, 0).
--
-- Conditioning of the discriminator (the paper's table 4 leaves it open):
-- the label goes through a learned embedding of size*size values, reshaped
-- to one extra image plane and concatenated to the image as channel
-- channels+1; the rest of CD is D with channels+1 inputs.
local M = {}

local function check(o, known, what)
  for k in pairs(o) do
    if not known[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
end

local G_OPTS = { z = true, size = true, channels = true, init = true, classes = true, embed = true }
local D_OPTS = { size = true, channels = true, init = true, classes = true, sigmoid = true,
                 dropout = true, bn = true, ada = true, ada_p = true }

-- The generator body from the first linear layer on (table 1).
local function generator(t, nin, size, channels)
  assert(size % 4 == 0, "dcgan G: size must be a multiple of 4")
  local s = size // 4
  local layers = {
    { "linear", nin, 128 * s * s },
    { "reshape", 128, s, s },
    { "bn", 128 },                    -- PyTorch default eps 1e-5
    { "upsample", 2 },
    { "conv", 128, 128, 3, 1, 1 },
    { "bn", 128, eps = 0.8 },         -- BatchNorm2d(128, 0.8): eps = 0.8
    { "lrelu", 0.2 },
    { "upsample", 2 },
    { "conv", 128, 64, 3, 1, 1 },
    { "bn", 64, eps = 0.8 },
    { "lrelu", 0.2 },
    { "conv", 64, channels, 3, 1, 1 },
    { "tanh" },
  }
  for _, l in ipairs(layers) do t[#t + 1] = l end
  return t
end

-- The discriminator body (table 2): four stride-2 blocks, then the head.
local function discriminator(t, cin, size, sigmoid, p, norm)
  assert(size % 16 == 0, "dcgan D: size must be a multiple of 16")
  local function block(i, o, bn)
    t[#t + 1] = { "conv", i, o, 3, 2, 1 }
    t[#t + 1] = { "lrelu", 0.2 }
    t[#t + 1] = { "dropout2d", p or 0.25 }
    if bn and norm ~= false then t[#t + 1] = { "bn", o, eps = 0.8 } end
  end
  block(cin, 16, false)
  block(16, 32, true)
  block(32, 64, true)
  block(64, 128, true)
  local s = size // 16
  t[#t + 1] = { "flatten" }
  t[#t + 1] = { "linear", 128 * s * s, 1 }
  if sigmoid ~= false then t[#t + 1] = { "sigmoid" } end
  return t
end

function M.G(o)
  o = o or {}
  check(o, G_OPTS, "dcgan.G")
  local z = o.z or 100
  local t = generator({}, z, o.size or 32, o.channels or 1)
  t.input_shape = { z }
  t.init = o.init
  return t
end

function M.D(o)
  o = o or {}
  check(o, D_OPTS, "dcgan.D")
  local size, c = o.size or 32, o.channels or 1
  local t = {}
  if o.ada then
    t[1] = { "ada", o.ada, p = o.ada_p or 0, name = "ada" }
  end
  discriminator(t, c, size, o.sigmoid, o.dropout, o.bn)
  t.input_shape = { c, size, size }
  t.init = o.init
  return t
end

-- DC-CGAN generator (table 3): input = noise (z) followed by a learned
-- label embedding (embed values): 100 + 10 = 110.
function M.CG(o)
  o = o or {}
  check(o, G_OPTS, "dcgan.CG")
  local z, classes = o.z or 100, o.classes or 10
  local embed = o.embed or classes
  local t = {
    { "embedding", classes, embed, input = "label", name = "label_embedding" },
    { "concat", input = "x", with = "label_embedding" },
  }
  generator(t, z + embed, o.size or 32, o.channels or 1)
  t.input_shape = { z }
  t.classes = classes
  t.init = o.init
  return t
end

-- DC-CGAN discriminator (table 4): the label becomes one extra image plane
-- (embedding of size*size values) concatenated to the image.
function M.CD(o)
  o = o or {}
  check(o, D_OPTS, "dcgan.CD")
  local size, c, classes = o.size or 32, o.channels or 1, o.classes or 10
  local t = {
    { "embedding", classes, size * size, input = "label" },
    { "reshape", 1, size, size, name = "label_plane" },
    { "concat", input = "x", with = "label_plane" },
  }
  discriminator(t, c + 1, size, o.sigmoid, o.dropout, o.bn)
  t.input_shape = { c, size, size }
  t.classes = classes
  t.init = o.init
  return t
end

return M

-- StyleGAN2 backbones (Karras et al. 2020, as StyleGAN2-ADA's
-- training/networks.py builds them: G with output skips, D residual),
-- composed from the layer builders of stylegan2_layers.lua (docs/nn.md
-- "StyleGAN2's layers"):
--
--   local sg2 = require "backbones.stylegan2"
--   G = sg2.G{ size = 32, channels = 3, z = 512, w = 512, mapping = 2, ch = 512, classes = 0, mixing = 0 }
--   D = sg2.D{ size = 32, channels = 3, ch = 512, classes = 0, mbstd = 32 }
--
-- The defaults are the ADA paper's CIFAR-10 configuration (mapping 2
-- layers, 512 channels at every resolution, conv_clamp 256, minibatch
-- stddev groups of 32); the CPU pipeline (pipelines/stylegan2_fashion.lua)
-- narrows ch, z and w.
--
-- G: mapping z -> w: normalize_2nd_moment(z) (norm2), [concatenated with
-- the normalised class embedding], `mapping` fully connected layers
-- (lr_mul 0.01, lrelu), then w_avg (the tracked mean of w, beta 0.995;
-- the truncation trick in eval forwards, psi set by `ganflow sample
-- truncation=`); synthesis: a learned 4x4 constant, per resolution two
-- synthesis layers (modulated 3x3 convs, the first upsampling by 2 with
-- the FIR filter; noise with one learned strength per layer, or per
-- channel with noise_strength = "channel", what checkpoints written before
-- the noise layer took StyleGAN2's scalar hold) and a toRGB whose image is
-- added to the FIR-upsampled image of the previous resolution. No output activation (StyleGAN2's G
-- is unbounded). mixing = 0 (default): every layer reads the same w;
-- pl = true (for g_step's pl): through its copy w<i> (style_w without
-- source: StyleGAN2's broadcast of w to the num_ws inputs ws, listed in
-- the table's penalty_at, where g_step's path length takes its gradient,
-- as StyleGAN2 does; mixing > 0 lists its style_w layers always).
--
-- Style mixing regularisation (mixing = p > 0, StyleGAN2-ADA's
-- style_mixing_prob; its configs use 0.9 except CIFAR, 0): a style_mix
-- layer after the mapping's normalised input adds a second row per sample,
-- a fresh z2 in training forwards; the mapping and w_avg run on both rows
-- with the same weights (w_avg tracks the first only), and each synthesis
-- layer reads its w through a style_w layer (w0..w<num_ws-1>, StyleGAN2's
-- order: b4 conv1 0, b4 toRGB and b8 conv0 1, b8 conv1 2, ...): with
-- probability p per batch, the layers from a cutoff drawn in
-- 1..num_ws-1 on read w2. Eval forwards (sampling, evaluation) never mix;
-- the layers hold no parameters, so checkpoints are those of mixing = 0.
--
-- D: fromRGB (1x1), per resolution a residual block (conv 3x3, conv 3x3
-- down 2, skip 1x1 down 2, both scaled by sqrt(0.5)), then at 4x4
-- minibatch stddev, conv 3x3, fc, out. Class-conditional (classes > 0):
-- the label's mapping cmap (embedding, normalised, `d_mapping` layers of
-- lr_mul 0.01) and the output <out(x), cmap> / sqrt(cmap_dim) (dot).
-- ada = "bgc" puts StyleGAN2-ADA's augmentation first (the layer {"ada",
-- "bgc", p = ada_p, name = "ada"}, whose p d_step adjusts: docs/train.md).
--
-- The class embedding is StyleGAN2-ADA's FullyConnectedLayer of the one-hot
-- label written as an embedding row E[y] plus a bias with lr_mul sqrt(classes)
-- (bias_act): E[y] + sqrt(K) b = sqrt(K) (E[y] / sqrt(K) + b), which the
-- normalisation that follows maps to the same vector, with the same Adam
-- steps on E and b (the parameter count is the same too).
local L = require "backbones.stylegan2_layers"
local M = {}

local G_OPTS = { size = true, channels = true, z = true, w = true, mapping = true, ch = true, ch_base = true,
                 classes = true, embed = true, clamp = true, noise = true, noise_strength = true, w_avg_beta = true,
                 lr_mul = true, mixing = true, pl = true }
local D_OPTS = { size = true, channels = true, ch = true, ch_base = true, classes = true, cmap = true,
                 d_mapping = true, clamp = true, mbstd = true, mbstd_channels = true, lr_mul = true, ada = true,
                 ada_p = true }

local function check(o, known, what)
  for k in pairs(o) do
    if not known[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
end

local function log2(size, what)
  local n, s = 0, size
  while s > 4 and s % 2 == 0 do s, n = s // 2, n + 1 end
  if s ~= 4 then error(what .. ": size must be 4 times a power of 2, got " .. tostring(size), 3) end
  return n
end

-- channels at a resolution: min(ch_base / res, ch) (StyleGAN2-ADA's
-- channels_dict; ch_base 32768 gives ch at every resolution up to 64)
local function chans(o, res)
  local ch, base = o.ch or 512, o.ch_base or 32768
  return math.min(base // res, ch)
end

local function add(t, l) t[#t + 1] = l; return l end

-- The label's normalised embedding (StyleGAN2-ADA's MappingNetwork.embed
-- then normalize_2nd_moment), named p.
local function embed(t, p, classes, dim)
  add(t, { "embedding", classes, dim, name = p .. "_table" })
  add(t, { "bias_act", dim, act = "linear", lr_mul = math.sqrt(classes), name = p .. "_bias" })
  add(t, { "norm2", name = p })
  return p
end

function M.G(o)
  o = o or {}
  check(o, G_OPTS, "stylegan2.G")
  local size, channels, classes = o.size or 32, o.channels or 3, o.classes or 0
  local zd, wd, nmap = o.z or 512, o.w or 512, o.mapping or 2
  local edim = o.embed or wd
  local lr_mul, clamp = o.lr_mul or 0.01, o.clamp
  if clamp == nil then clamp = 256 end
  if clamp == 0 then clamp = nil end
  local nres = log2(size, "stylegan2.G")
  local t = { input_shape = { zd }, classes = classes > 0 and classes or nil }
  -- mapping
  add(t, { "norm2", input = "x", name = "z_norm" })
  local x, fin = "z_norm", zd
  if classes > 0 then
    embed(t, "c_embed", classes, edim)
    add(t, { "concat", input = "z_norm", with = "c_embed", name = "zc" })
    x, fin = "zc", zd + edim
  end
  local mixing = o.mixing or 0
  if type(mixing) ~= "number" or mixing < 0 or mixing > 1 then
    error("stylegan2.G: mixing must be a probability in [0, 1], got " .. tostring(mixing), 2)
  end
  if mixing > 0 then
    add(t, { "style_mix", z = zd, prob = mixing, layers = 2 + 2 * nres, input = x, name = "mix" })
    x = "mix"
  end
  for i = 1, nmap do
    x = L.fc(t, "map" .. (i - 1), x, fin, wd, { lr_mul = lr_mul, act = "lrelu" })
    fin = wd
  end
  add(t, { "w_avg", wd, beta = o.w_avg_beta or 0.995, input = x, name = "w" })
  -- the w synthesis layer i reads: its style_w layer w<i> (added before
  -- the first layer that reads it), its row of the two (mixing > 0) or,
  -- with pl = true, a copy of w; these ws are the path length's points
  -- (penalty_at: g_step's pl differentiates with respect to them). Else
  -- w itself (the same values; w's gradient summed in another order).
  local added = {}
  local pl = mixing > 0 or o.pl
  t.penalty_at = pl and {} or nil
  local function ws(i)
    if not pl then return "w" end
    local name = "w" .. i
    if not added[name] then
      add(t, { "style_w", index = i, source = mixing > 0 and "mix" or nil, input = "w", name = name })
      added[name] = true
      t.penalty_at[#t.penalty_at + 1] = name
    end
    return name
  end
  -- synthesis
  local so = { w_dim = wd, noise = o.noise, strength = o.noise_strength, clamp = clamp }
  local c4 = chans(o, 4)
  add(t, { "const", c4, 4, 4, input = "x", name = "b4_const" })
  x = L.synthesis(t, "b4_conv1", "b4_const", ws(0), c4, c4, so)
  local img = L.torgb(t, "b4_torgb", x, ws(1), c4, channels, so)
  local cin, res, wi = c4, 4, 1
  for _ = 1, nres do
    res = res * 2
    local c = chans(o, res)
    local p = "b" .. res
    x = L.synthesis(t, p .. "_conv0", x, ws(wi), cin, c,
                    { w_dim = wd, noise = o.noise, strength = o.noise_strength, clamp = clamp, up = 2 })
    x = L.synthesis(t, p .. "_conv1", x, ws(wi + 1), c, c, so)
    add(t, { "fir", up = 2, input = img, name = p .. "_up" })
    local rgb = L.torgb(t, p .. "_torgb", x, ws(wi + 2), c, channels, so)
    wi = wi + 2
    add(t, { "add", input = p .. "_up", with = rgb, name = p .. "_img" })
    img, cin = p .. "_img", c
  end
  return t
end

function M.D(o)
  o = o or {}
  check(o, D_OPTS, "stylegan2.D")
  local size, channels, classes = o.size or 32, o.channels or 3, o.classes or 0
  local clamp = o.clamp
  if clamp == nil then clamp = 256 end
  if clamp == 0 then clamp = nil end
  local nres = log2(size, "stylegan2.D")
  local t = { input_shape = { channels, size, size }, classes = classes > 0 and classes or nil }
  local res, x = size, "x"
  if o.ada then   -- StyleGAN2-ADA's augmentation of every image D sees (d_step adjusts p)
    add(t, { "ada", o.ada, p = o.ada_p or 0, name = "ada" })
    x = "ada"
  end
  x = L.conv(t, "b" .. res .. "_fromrgb", x, channels, chans(o, res), { k = 1, clamp = clamp })
  local g = math.sqrt(0.5)
  for _ = 1, nres do
    local p, c, cout = "b" .. res, chans(o, res), chans(o, res // 2)
    local skip = L.conv(t, p .. "_skip", x, c, cout, { k = 1, down = 2, act = "linear", bias = false, gain = g })
    local y = L.conv(t, p .. "_conv0", x, c, c, { clamp = clamp })
    y = L.conv(t, p .. "_conv1", y, c, cout, { down = 2, clamp = clamp, gain = g })
    add(t, { "add", input = y, with = skip, name = p })
    x, res = p, res // 2
  end
  -- epilogue at 4x4
  local c4 = chans(o, 4)
  local cmap = classes > 0 and (o.cmap or c4) or 0
  add(t, { "mbstd", o.mbstd or 32, o.mbstd_channels or 1, input = x, name = "b4_mbstd" })
  x = L.conv(t, "b4_conv", "b4_mbstd", c4 + (o.mbstd_channels or 1), c4, { clamp = clamp })
  add(t, { "flatten", input = x, name = "b4_flat" })
  x = L.fc(t, "b4_fc", "b4_flat", c4 * 16, c4, { act = "lrelu" })
  x = L.fc(t, "b4_out", x, c4, cmap > 0 and cmap or 1)
  if cmap > 0 then
    local m = embed(t, "cmap_embed", classes, cmap)
    for i = 1, o.d_mapping or 8 do
      m = L.fc(t, "cmap" .. (i - 1), m, cmap, cmap, { lr_mul = o.lr_mul or 0.01, act = "lrelu" })
    end
    add(t, { "dot", input = x, with = m, scale = 1 / math.sqrt(cmap), name = "out" })
  end
  return t
end

return M

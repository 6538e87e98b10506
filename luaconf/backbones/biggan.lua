-- BigGAN backbones (Brock et al. 2019, "Large Scale GAN Training for High
-- Fidelity Natural Image Synthesis", appendix B, tables 4-6: the 32, 64
-- and 128 architectures):
--
--   local biggan = require "backbones.biggan"
--   G = biggan.G{ size = 128, ch = 96, z = 120, shared = 128, classes = 1000, attention = 64 }
--   D = biggan.D{ size = 128, ch = 96, classes = 1000, attention = 64 }
--
-- G: a shared class embedding (`shared` values); hierarchical z: z is cut
-- into one chunk per up-block plus one for the first linear layer, and
-- each block's conditional batch norms (cbn, BigGAN's ccbn: gain 1 + W_g c,
-- bias W_b c, spectral-normalised projections) take c = [shared(y), its z
-- chunk]; up-blocks of ch x {4, 4, 4} (32), {16, 16, 8, 4, 2} (64: from 16,
-- four blocks) or {16, 16, 8, 4, 2, 1} (128) channels from 4x4; BN, ReLU,
-- conv 3x3, tanh. D: down-blocks of ch x {4, 4, 4, 4} (32: two of them
-- down-sample), {1, 2, 4, 8, 16} (64) or {1, 2, 4, 8, 16, 16} (128: all but
-- the last down-sample), ReLU, global sum pooling, linear plus the
-- projection of the class embedding. Spectral norm everywhere in G and D
-- (not on the shared embedding, as BigGAN). attention = R (default 64 at
-- 128, none at 32 and 64 unless given) adds self-attention after the
-- block whose output is RxR, in G and D. classes = 0 gives the
-- unconditional variant (c = the z chunk, no projection).
--
-- Not in the table (pipeline options): orthogonal regularisation
-- (g_step ortho = 1e-4, ortho_skip = "shared"), the EMA of G (g_step
-- ema), the learning rates (G 1e-4, D 4e-4, Adam betas (0, 0.999)) and
-- n_dis. BigGAN's orthogonal initialisation is not implemented: layers
-- start from PyTorch's defaults (init = "dcgan": N(0, 0.02)).
local rn = require "backbones.resnet"
local M = {}

local G_OPTS = { size = true, ch = true, z = true, shared = true, channels = true, classes = true, init = true,
                 attention = true }
local D_OPTS = { size = true, ch = true, channels = true, classes = true, init = true, attention = true,
                 augment = true }

local ARCH = {
  [32] = { g = { 4, 4, 4, 4 }, d = { 4, 4, 4, 4 }, down = { true, true, false, false } },
  [64] = { g = { 16, 16, 8, 4, 2 }, d = { 1, 2, 4, 8, 16 }, down = { true, true, true, true } },
  [128] = { g = { 16, 16, 8, 4, 2, 1 }, d = { 1, 2, 4, 8, 16, 16 }, down = { true, true, true, true, true, false } },
}

local function arch(size)
  local a = ARCH[size]
  if not a then error("biggan: size must be 32, 64 or 128, got " .. tostring(size), 3) end
  return a
end

function M.G(o)
  o = o or {}
  rn.check(o, G_OPTS, "biggan.G")
  local size, channels, classes = o.size or 32, o.channels or 3, o.classes or 0
  local a = arch(size)
  local ch = o.ch or (size == 128 and 96 or 64)
  local nb = #a.g - 1
  local z = o.z or (size == 32 and 128 or 120)
  local slots = nb + 1
  if z % slots ~= 0 then
    error(string.format("biggan.G: z = %d must split into %d equal chunks (one per block and one for the "
                        .. "first layer)", z, slots), 2)
  end
  local chunk, shared = z // slots, o.shared or 128
  local attention = o.attention
  if attention == nil and size == 128 then attention = 64 end
  local t = { input_shape = { z }, classes = classes > 0 and classes or nil, init = o.init }
  local function add(l) t[#t + 1] = l end
  if classes > 0 then add({ "embedding", classes, shared, input = "label", name = "shared" }) end
  add({ "split", 0, chunk, input = "x" })
  add({ "linear", chunk, a.g[1] * ch * 16, sn = true })
  add({ "reshape", a.g[1] * ch, 4, 4, name = "h0" })
  local x, res = "h0", 4
  for i = 1, nb do
    local zc = "z" .. i
    add({ "split", i * chunk, (i + 1) * chunk, input = "x", name = zc })
    local cond, cdim = zc, chunk
    if classes > 0 then
      add({ "concat", input = "shared", with = zc, name = "c" .. i })
      cond, cdim = "c" .. i, chunk + shared
    end
    local norm = function(c, extra)
      local l = { "cbn", c, cond = cond, sn = true }
      for k, v in pairs(extra) do l[k] = v end
      return l
    end
    x = rn.up(t, "g" .. i, x, a.g[i] * ch, a.g[i + 1] * ch, { norm = norm, sn = true })
    res = res * 2
    if attention == res then
      add({ "attention", a.g[i + 1] * ch, sn = true, input = x, name = "attn" })
      x = "attn"
    end
  end
  add({ "bn", a.g[#a.g] * ch, input = x })
  add({ "relu" })
  add({ "conv", a.g[#a.g] * ch, channels, 3, 1, 1, sn = true })
  add({ "tanh" })
  return t
end

function M.D(o)
  o = o or {}
  rn.check(o, D_OPTS, "biggan.D")
  local size, channels, classes = o.size or 32, o.channels or 3, o.classes or 0
  local a = arch(size)
  local ch = o.ch or (size == 128 and 96 or 64)
  local attention = o.attention
  if attention == nil and size == 128 then attention = 64 end
  local t = { input_shape = { channels, size, size }, classes = classes > 0 and classes or nil, init = o.init }
  local x = "x"
  if o.augment then
    t[#t + 1] = { "diffaugment", o.augment, name = "aug" }
    x = "aug"
  end
  local cin, res = channels, size
  for i = 1, #a.d do
    local cout = a.d[i] * ch
    x = rn.down(t, "d" .. i, x, cin, cout, { sn = true, first = i == 1, down = a.down[i] })
    if a.down[i] then res = res // 2 end
    if attention == res and not t.attn_done then
      t[#t + 1] = { "attention", cout, sn = true, input = x, name = "attn" }
      x = "attn"
      t.attn_done = true
    end
    cin = cout
  end
  t.attn_done = nil
  rn.head(t, x, cin, classes, true)
  return t
end

return M

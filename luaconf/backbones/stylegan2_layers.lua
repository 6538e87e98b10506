-- StyleGAN2's layers as ganflow layer tables (docs/nn.md "StyleGAN2's
-- layers"): each function appends the layers of one of StyleGAN2-ADA's
-- layer classes (training/networks.py) to a network table t, names them
-- after a prefix p, and returns the name of its output. The backbone
-- (stylegan2.lua) composes them.
--
--   fc(t, p, x, fin, fout, o)            FullyConnectedLayer: eqlr linear (o.lr_mul = 1, o.bias_init = 0)
--                                        then bias_act (o.act = "linear" | "lrelu")
--   conv(t, p, x, cin, cout, o)          Conv2dLayer: [fir] eqlr conv k x k (o.k = 3), bias_act (o.act =
--                                        "lrelu", o.bias = true, o.clamp, o.gain = 1: the call's gain,
--                                        sqrt(0.5) in D's residual block); o.down = 2: conv2d_resample's
--                                        downsampling (blur pad 2 + stride-2 conv; 1x1: downsample2d + conv)
--   synthesis(t, p, x, w, cin, cout, o)  SynthesisLayer: affine of w (o.w_dim), modconv 3x3 (o.up = 1 or 2,
--                                        then fir pad 1 gain 4), noise (o.noise = "auto"; o.strength =
--                                        "scalar", SynthesisLayer's, or "channel"), bias_act lrelu (o.clamp)
--   torgb(t, p, x, w, cin, cout, o)      ToRGBLayer: affine, modconv 1x1 without demodulation, bias_act
--                                        linear (o.clamp)
local M = {}

local function add(t, l) t[#t + 1] = l; return l end

local function clamp_of(o, g) return o.clamp and o.clamp * g or nil end

function M.fc(t, p, x, fin, fout, o)
  o = o or {}
  add(t, { "linear", fin, fout, eqlr = true, lr_mul = o.lr_mul, bias_init = o.bias_init, input = x, name = p .. "_fc" })
  add(t, { "bias_act", fout, act = o.act or "linear", bias = false, name = p })
  return p
end

function M.conv(t, p, x, cin, cout, o)
  o = o or {}
  local k, g, act = o.k or 3, o.gain or 1, o.act or "lrelu"
  if o.down == 2 then
    if k == 1 then
      add(t, { "fir", down = 2, input = x, name = p .. "_down" })
      add(t, { "conv", cin, cout, 1, eqlr = true, bias = false, name = p .. "_conv" })
    else
      -- conv2d_resample: pad k//2 + (4 - 2 + 1)//2 before, k//2 + 1 after, then stride 2
      add(t, { "fir", pad = k // 2 + 1, input = x, name = p .. "_blur" })
      add(t, { "conv", cin, cout, k, 2, 0, eqlr = true, bias = false, name = p .. "_conv" })
    end
  else
    add(t, { "conv", cin, cout, k, 1, k // 2, eqlr = true, bias = false, input = x, name = p .. "_conv" })
  end
  local gain = (act == "linear" and 1 or math.sqrt(2)) * g
  add(t, { "bias_act", cout, act = act, bias = o.bias ~= false, gain = gain, clamp = clamp_of(o, g), name = p })
  return p
end

function M.synthesis(t, p, x, w, cin, cout, o)
  add(t, { "linear", o.w_dim, cin, eqlr = true, bias_init = 1, input = w, name = p .. "_affine" })
  add(t, { "modconv", cin, cout, 3, with = p .. "_affine", up = o.up or 1, input = x, name = p .. "_conv" })
  if (o.up or 1) == 2 then add(t, { "fir", pad = 1, gain = 4, name = p .. "_blur" }) end
  add(t, { "noise", cout, mode = o.noise, strength = o.strength, name = p .. "_noise" })
  add(t, { "bias_act", cout, clamp = o.clamp, name = p })
  return p
end

function M.torgb(t, p, x, w, cin, cout, o)
  add(t, { "linear", o.w_dim, cin, eqlr = true, bias_init = 1, input = w, name = p .. "_affine" })
  add(t, { "modconv", cin, cout, 1, with = p .. "_affine", demod = false, input = x, name = p .. "_conv" })
  add(t, { "bias_act", cout, act = "linear", clamp = o.clamp, name = p })
  return p
end

return M

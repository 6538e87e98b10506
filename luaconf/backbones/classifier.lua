-- A small CNN classifier for the evaluator (FID/IS/KID features) and for
-- pipelines/classifier_fashion.lua: two conv-bn-relu-maxpool stages, a
-- fully connected feature layer named "features" (the embedding the
-- evaluator reads with gf_net_node), dropout and the class logits.
--
--   local cls = require "backbones.classifier"
--   net = cls.classifier{ size = 28, channels = 1, classes = 10 }
--
-- Options: size (image side, a multiple of 4, 28), channels (1), classes
-- (10), width (channels of the first stage, 32), features (128), dropout
-- (0.5), probs (append a softmax, false: train on logits with the "ce" loss).
local M = {}

local OPTS = { size = true, channels = true, classes = true, width = true, features = true,
               dropout = true, probs = true, init = true }

function M.classifier(o)
  o = o or {}
  for k in pairs(o) do
    if not OPTS[k] then error("classifier: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local size, c = o.size or 28, o.channels or 1
  local w, f, classes = o.width or 32, o.features or 128, o.classes or 10
  assert(size % 4 == 0, "classifier: size must be a multiple of 4")
  local s = size // 4
  local t = {
    { "conv", c, w, 3, 1, 1 },
    { "bn", w },
    { "relu" },
    { "maxpool", 2 },
    { "conv", w, 2 * w, 3, 1, 1 },
    { "bn", 2 * w },
    { "relu" },
    { "maxpool", 2 },
    { "flatten" },
    { "linear", 2 * w * s * s, f },
    { "relu", name = "features" },
    { "dropout", o.dropout or 0.5 },
    { "linear", f, classes, name = "logits" },
  }
  if o.probs then t[#t + 1] = { "softmax", name = "probs" } end
  t.input_shape = { c, size, size }
  t.init = o.init
  return t
end

return M

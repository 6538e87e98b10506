-- The Inception-v3 network of FID and IS: the variant TensorFlow's
-- pt_inception-2015-12-05 graph computes and pytorch-fid reproduces in
-- PyTorch (its FIDInceptionA/C/E blocks): average pooling inside the
-- blocks without counting padding (count_include_pad = false), max pooling
-- in the last block's pool branch, batchnorm eps 0.001, the 2048 pool3
-- features and the 1008 logits (IS) of the original graph.
--
--   local inception = require "backbones.inception"
--   net = inception.fid{}
--
-- Layer names are pytorch-fid's module names with "/" for the dots that
-- layer names cannot hold ("Mixed_6b/branch7x7_2/conv"), so parameter
-- "Mixed_6b/branch7x7_2/conv.weight" is "Mixed_6b.branch7x7_2.conv.weight"
-- of pt_inception-2015-12-05-6726825d.pth: `ganflow weights import` maps
-- that file onto this table name for name (docs/eval.md). Nodes read by the
-- evaluator: "features" (pool3, 2048) and the output, "fc" (the 1008 logits).
-- Input: (3, 299, 299) in [-1, 1] (the evaluator resizes and scales).
--
-- Options: size (input side, 299), classes (1008; 0 leaves the fc out and
-- makes pool3 the output).
local M = {}

local OPTS = { size = true, classes = true }

-- BasicConv2d: conv without bias, batchnorm (eps 0.001), ReLU. k and pad
-- are {h, w} pairs or one number.
local function basic(t, name, input, cin, cout, k, o)
  o = o or {}
  local kh, kw = k, k
  if type(k) == "table" then kh, kw = k[1], k[2] end
  local ph, pw = o.pad or 0, o.pad or 0
  if type(o.pad) == "table" then ph, pw = o.pad[1], o.pad[2] end
  t[#t + 1] = { "conv", cin, cout, kh, o.stride or 1, ph, kw = kw, pw = pw, bias = false,
                name = name .. "/conv", input = input }
  t[#t + 1] = { "bn", cout, eps = 0.001, name = name .. "/bn" }
  t[#t + 1] = { "relu", name = name }
  return name
end

-- Concatenation of named nodes along the channels, in order; the last
-- concat takes the block's name.
local function cat(t, name, parts)
  local prev = parts[1]
  for i = 2, #parts do
    local out = i == #parts and name or (name .. "/cat" .. i)
    t[#t + 1] = { "concat", input = prev, with = parts[i], name = out }
    prev = out
  end
  return name
end

local function pool(t, name, input, kind, k, stride, pad)
  local p = { kind, k, stride = stride, pad = pad, name = name, input = input }
  if kind == "avgpool" then p.count_include_pad = false end
  t[#t + 1] = p
  return name
end

-- FIDInceptionA (Mixed_5b..5d)
local function block_a(t, n, x, cin, pool_features)
  local b1 = basic(t, n .. "/branch1x1", x, cin, 64, 1)
  local b5 = basic(t, n .. "/branch5x5_1", x, cin, 48, 1)
  b5 = basic(t, n .. "/branch5x5_2", b5, 48, 64, 5, { pad = 2 })
  local b3 = basic(t, n .. "/branch3x3dbl_1", x, cin, 64, 1)
  b3 = basic(t, n .. "/branch3x3dbl_2", b3, 64, 96, 3, { pad = 1 })
  b3 = basic(t, n .. "/branch3x3dbl_3", b3, 96, 96, 3, { pad = 1 })
  local bp = pool(t, n .. "/avgpool", x, "avgpool", 3, 1, 1)
  bp = basic(t, n .. "/branch_pool", bp, cin, pool_features, 1)
  return cat(t, n, { b1, b5, b3, bp }), 224 + pool_features
end

-- InceptionB (Mixed_6a): grid reduction 35 -> 17
local function block_b(t, n, x, cin)
  local b3 = basic(t, n .. "/branch3x3", x, cin, 384, 3, { stride = 2 })
  local bd = basic(t, n .. "/branch3x3dbl_1", x, cin, 64, 1)
  bd = basic(t, n .. "/branch3x3dbl_2", bd, 64, 96, 3, { pad = 1 })
  bd = basic(t, n .. "/branch3x3dbl_3", bd, 96, 96, 3, { stride = 2 })
  local bp = pool(t, n .. "/maxpool", x, "maxpool", 3, 2, 0)
  return cat(t, n, { b3, bd, bp }), 384 + 96 + cin
end

-- FIDInceptionC (Mixed_6b..6e): factorised 7x7 convolutions
local function block_c(t, n, x, cin, c7)
  local b1 = basic(t, n .. "/branch1x1", x, cin, 192, 1)
  local b7 = basic(t, n .. "/branch7x7_1", x, cin, c7, 1)
  b7 = basic(t, n .. "/branch7x7_2", b7, c7, c7, { 1, 7 }, { pad = { 0, 3 } })
  b7 = basic(t, n .. "/branch7x7_3", b7, c7, 192, { 7, 1 }, { pad = { 3, 0 } })
  local bd = basic(t, n .. "/branch7x7dbl_1", x, cin, c7, 1)
  bd = basic(t, n .. "/branch7x7dbl_2", bd, c7, c7, { 7, 1 }, { pad = { 3, 0 } })
  bd = basic(t, n .. "/branch7x7dbl_3", bd, c7, c7, { 1, 7 }, { pad = { 0, 3 } })
  bd = basic(t, n .. "/branch7x7dbl_4", bd, c7, c7, { 7, 1 }, { pad = { 3, 0 } })
  bd = basic(t, n .. "/branch7x7dbl_5", bd, c7, 192, { 1, 7 }, { pad = { 0, 3 } })
  local bp = pool(t, n .. "/avgpool", x, "avgpool", 3, 1, 1)
  bp = basic(t, n .. "/branch_pool", bp, cin, 192, 1)
  return cat(t, n, { b1, b7, bd, bp }), 768
end

-- InceptionD (Mixed_7a): grid reduction 17 -> 8
local function block_d(t, n, x, cin)
  local b3 = basic(t, n .. "/branch3x3_1", x, cin, 192, 1)
  b3 = basic(t, n .. "/branch3x3_2", b3, 192, 320, 3, { stride = 2 })
  local b7 = basic(t, n .. "/branch7x7x3_1", x, cin, 192, 1)
  b7 = basic(t, n .. "/branch7x7x3_2", b7, 192, 192, { 1, 7 }, { pad = { 0, 3 } })
  b7 = basic(t, n .. "/branch7x7x3_3", b7, 192, 192, { 7, 1 }, { pad = { 3, 0 } })
  b7 = basic(t, n .. "/branch7x7x3_4", b7, 192, 192, 3, { stride = 2 })
  local bp = pool(t, n .. "/maxpool", x, "maxpool", 3, 2, 0)
  return cat(t, n, { b3, b7, bp }), 320 + 192 + cin
end

-- FIDInceptionE_1 (Mixed_7b, average pool) and _2 (Mixed_7c, max pool)
local function block_e(t, n, x, cin, maxpool)
  local b1 = basic(t, n .. "/branch1x1", x, cin, 320, 1)
  local b3 = basic(t, n .. "/branch3x3_1", x, cin, 384, 1)
  local b3a = basic(t, n .. "/branch3x3_2a", b3, 384, 384, { 1, 3 }, { pad = { 0, 1 } })
  local b3b = basic(t, n .. "/branch3x3_2b", b3, 384, 384, { 3, 1 }, { pad = { 1, 0 } })
  local bd = basic(t, n .. "/branch3x3dbl_1", x, cin, 448, 1)
  bd = basic(t, n .. "/branch3x3dbl_2", bd, 448, 384, 3, { pad = 1 })
  local bda = basic(t, n .. "/branch3x3dbl_3a", bd, 384, 384, { 1, 3 }, { pad = { 0, 1 } })
  local bdb = basic(t, n .. "/branch3x3dbl_3b", bd, 384, 384, { 3, 1 }, { pad = { 1, 0 } })
  local bp = maxpool and pool(t, n .. "/maxpool", x, "maxpool", 3, 1, 1)
                     or pool(t, n .. "/avgpool", x, "avgpool", 3, 1, 1)
  bp = basic(t, n .. "/branch_pool", bp, cin, 192, 1)
  return cat(t, n, { b1, b3a, b3b, bda, bdb, bp }), 2048
end

function M.fid(o)
  o = o or {}
  for k in pairs(o) do
    if not OPTS[k] then error("inception: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local size, classes = o.size or 299, o.classes or 1008
  local t = {}
  local x = basic(t, "Conv2d_1a_3x3", "x", 3, 32, 3, { stride = 2 })
  x = basic(t, "Conv2d_2a_3x3", x, 32, 32, 3)
  x = basic(t, "Conv2d_2b_3x3", x, 32, 64, 3, { pad = 1 })
  x = pool(t, "MaxPool_1", x, "maxpool", 3, 2, 0)
  x = basic(t, "Conv2d_3b_1x1", x, 64, 80, 1)
  x = basic(t, "Conv2d_4a_3x3", x, 80, 192, 3)
  x = pool(t, "MaxPool_2", x, "maxpool", 3, 2, 0)
  local c = 192
  x, c = block_a(t, "Mixed_5b", x, c, 32)
  x, c = block_a(t, "Mixed_5c", x, c, 64)
  x, c = block_a(t, "Mixed_5d", x, c, 64)
  x, c = block_b(t, "Mixed_6a", x, c)
  x, c = block_c(t, "Mixed_6b", x, c, 128)
  x, c = block_c(t, "Mixed_6c", x, c, 160)
  x, c = block_c(t, "Mixed_6d", x, c, 160)
  x, c = block_c(t, "Mixed_6e", x, c, 192)
  x, c = block_d(t, "Mixed_7a", x, c)
  x, c = block_e(t, "Mixed_7b", x, c, false)
  x, c = block_e(t, "Mixed_7c", x, c, true)
  -- pool3: the mean over the remaining grid (8x8 at 299)
  local side = size
  side = (side - 3) // 2 + 1            -- Conv2d_1a
  side = side - 2                       -- Conv2d_2a
  side = (side - 3) // 2 + 1            -- MaxPool_1
  side = side - 2                       -- Conv2d_4a
  side = (side - 3) // 2 + 1            -- MaxPool_2
  side = (side - 3) // 2 + 1            -- Mixed_6a
  side = (side - 3) // 2 + 1            -- Mixed_7a
  assert(side >= 1, "inception: size too small")
  t[#t + 1] = { "avgpool", side, name = "pool3", input = x }
  t[#t + 1] = { "flatten", name = "features" }
  if classes > 0 then t[#t + 1] = { "linear", c, classes, name = "fc" } end
  t.input_shape = { 3, size, size }
  return t
end

return M

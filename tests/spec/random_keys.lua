-- random_keys.lua: random entries of the index grammar and shape helpers, shared by the randomised specs
-- of tensors and TensorDicts (math.random, seeded by each spec).
local rand = math.random
local M = {}

function M.bound(size)
  local b
  repeat b = rand(-size - 2, size + 2) until b ~= 0
  return b
end

-- One random entry for a dim of this size (never 0, which is an error).
function M.entry(size)
  local r = rand()
  if r < 0.35 and size > 0 then
    local i = rand(1, size)
    return rand() < 0.5 and i or i - size - 1
  elseif r < 0.8 then
    local range = { M.bound(size), M.bound(size) }
    if rand() < 0.4 then range[3] = rand(1, 3) end
    return range
  end
  return {}
end

-- Elements of a tensor of this shape (a Lua array of sizes).
function M.numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- A key as text for failure messages: N is newaxis, E the ellipsis, a tensor entry
-- its dtype and shape.
function M.show(key)
  local T = require("tensordict")
  if type(key) ~= "table" or T.is_tensor(key) then key = { key } end
  local parts = {}
  for i, e in ipairs(key) do
    if e == T.newaxis then
      parts[i] = "N"
    elseif e == T.ellipsis then
      parts[i] = "E"
    elseif T.is_tensor(e) then
      parts[i] = e:dtype() .. "[" .. table.concat(e:shape(), "x") .. "]"
    elseif type(e) == "table" then
      parts[i] = "{" .. table.concat(e, ",") .. "}"
    else
      parts[i] = tostring(e)
    end
  end
  return table.concat(parts, " ")
end

return M

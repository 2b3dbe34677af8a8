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

return M

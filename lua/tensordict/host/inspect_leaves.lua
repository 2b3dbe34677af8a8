-- host/inspect_leaves.lua: the entries of an opened container (a TensorDict, or an HDF5
-- file's reader) by dotted key, for --head and --hist: what each key is ("tensor",
-- "dict", "value"), its value, and a did-you-mean error for a key that is not there.
local T = require("tensordict")
local util = require("tensordict.util")
local h5 = require("tensordict.h5.dict")
local describe = require("tensordict.dict.describe")

local M = {}

-- Every entry of c below prefix, in order: {key =, kind =, get = function}. A nested
-- container comes before its leaves.
local function walk(c, prefix, out)
  for _, k in ipairs(c:keys()) do
    local key = prefix and (prefix .. "." .. k) or k
    if h5.is_h5(c) then
      local kind = c:kind(k)
      local child = kind == "group" and c:get(k)
      out[#out + 1] = { key = key, kind = child and "dict" or kind == "tensor" and "tensor" or "value",
                        get = function() return c:get(k) end }
      if child then walk(child, key, out) end
    else
      local v = c:get(k)
      local kind = T.is_tensordict(v) and "dict" or T.is_tensor(v) and "tensor" or "value"
      out[#out + 1] = { key = key, kind = kind, get = function() return v end }
      if kind == "dict" then walk(v, key, out) end
    end
  end
  return out
end

function M.entries(c) return walk(c, nil, {}) end

-- The tensor leaves of a TensorDict as {key, tensor}, in key order.
M.tensors = describe.leaves

-- The tensor at key (dotted) in c; raises naming the option (call) and the path for a
-- key that is missing (with the nearest key), a nested container or a non-tensor value.
function M.tensor(c, key, call, path)
  local entries, names = M.entries(c), {}
  for _, e in ipairs(entries) do
    names[#names + 1] = e.key
    if e.key == key then
      if e.kind == "tensor" then return e.get() end
      local leaves = {}
      for _, x in ipairs(entries) do
        if x.kind == "tensor" and x.key:sub(1, #key + 1) == key .. "." then leaves[#leaves + 1] = x.key end
      end
      if e.kind == "dict" then
        util.fail(("%s: '%s' in %s is a nested container, not a leaf of numbers (its leaves: %s)")
          :format(call, key, path, #leaves > 0 and table.concat(leaves, ", ") or "none"))
      end
      util.fail(("%s: '%s' in %s is a non-tensor value, not a leaf of numbers"):format(call, key, path))
    end
  end
  util.fail(("%s: %s has no key '%s'%s"):format(call, path, key, util.did_you_mean(key, names)))
end

return M

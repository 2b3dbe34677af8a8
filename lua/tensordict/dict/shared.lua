-- dict/shared.lua: td:share_memory_() and td:is_shared(): tensor leaves in anonymous
-- shared memory (core's TD_STORAGE_SHARED storages), which processes forked afterwards
-- (td:map's workers, flow.Map) see and write without copies.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local create = require("tensordict.tensor.create")
local tensor = require("tensordict.tensor")
local core = require("tensordict.dict.core")

local TD = core.methods
local cdict = core.cdict
local fail = util.fail

local function kind_of(leaf) return (C.td_storage_kind(leaf.h.storage)) end

-- fn(path, leaf) for every tensor leaf of td, nested ones included.
local function each_leaf(td, fn)
  for _, path in ipairs(TD.keys(td, { include_nested = true, leaves_only = true })) do
    local leaf = TD.get(td, path)
    if tensor.is_tensor(leaf) then fn(path, leaf) end
  end
end

-- td:share_memory_(): every tensor leaf moved into shared memory (a leaf there already
-- stays), then td locked, as Python's share_memory_. The entries are replaced: a leaf
-- read before still sees the old memory. Memory-mapped leaves raise, as in Python
-- (memmap and shared memory exclude each other). Returns td.
function TD.share_memory_(self)
  cdict(self)
  each_leaf(self, function(path, leaf)
    if kind_of(leaf) == C.TD_STORAGE_FILE then
      fail(("share_memory_: %s is memory-mapped from a file; memmap and shared memory "
        .. "exclude each other"):format(core.key_text(path)))
    end
  end)
  C.td_dict_set_locked(cdict(self), 0) -- replacing entries; locked again below, also on error
  local ok, err = pcall(each_leaf, self, function(path, leaf)
    if kind_of(leaf) ~= C.TD_STORAGE_SHARED then
      local moved = create.empty(leaf:shape(), leaf:dtype(), { shared = true })
      moved:copy_(leaf)
      TD.set(self, path, moved)
    end
  end)
  C.td_dict_set_locked(cdict(self), 1)
  if not ok then error(err, 0) end
  return self
end

-- td:is_shared(): true when td has tensor leaves and all of them live in shared memory.
-- (Python answers from a flag share_memory_ sets; this looks at the leaves, so a
-- container assembled from shared tensors says true too.)
function TD.is_shared(self)
  cdict(self)
  local any, all = false, true
  each_leaf(self, function(_, leaf)
    any = true
    if kind_of(leaf) ~= C.TD_STORAGE_SHARED then all = false end
  end)
  return any and all
end

return {}

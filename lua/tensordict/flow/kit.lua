-- flow/kit.lua: the plugin API (docs/flow.md, "The plugin kit"). What a plugin's node
-- types and functions need from the library beside flow.define, so that plugins reach
-- into no internal module: key access with the built-in nodes' messages, "did you
-- mean" hints, errors that blame the plugin's user, and files written atomically
-- through the library's commit.
--
--   local kit = require("tensordict").flow.kit.new()   -- once, at the top of the file
--
-- new() remembers the file that called it: the kit's errors blame the first line
-- outside the library and outside that file, the line of the script or recipe step
-- that called the plugin (util.fail alone would blame the plugin's own line).
local util = require("tensordict.util")
local fs = require("tensordict.fs")
local core = require("tensordict.flow.core")
local meter = require("tensordict.flow.meter")

local M = {}

-- The options of kit.write_file.
local WRITE_OPTIONS = { fsync = "boolean", who = "string|table" }

-- "physics.Histogram" for a node (its type name), who itself for a string.
local function name_of(who)
  if type(who) == "table" and who.type_name then return who.type_name end
  return (tostring(who))
end

-- The helpers every kit holds, the same for every plugin (none of them raises).
local shared = {
  -- messages
  key_text = core.key_text,        -- 'obs', or {"next", "obs"} for a key path
  keys_text = core.keys_text,      -- a batch's leaf keys, for "its keys: ..." messages
  describe = util.describe,        -- any value for a message: 'text', 3, a tensor, a table
  format_list = util.format_list,  -- {4, 3} -> "[4, 3]"
  nearest = util.nearest,          -- the closest of a list of names, or nil
  did_you_mean = util.did_you_mean, -- " (did you mean 'name'?)", or ""
  -- batches and the run
  writable = core.writable,        -- td, or its shallow unlocked copy when it is locked
  rows = meter.rows,               -- the rows a batch counts for (1 for batch size [])
  setting = core.setting,          -- p[name], else the run's ctx[name], else a fallback
  exists = fs.exists,              -- whether a path exists
  -- checks before any data moves (a node's preflight and check_dtypes)
  memory_problem = core.memory_problem, -- bytes held at once against the machine's memory
  dtype_problem = core.dtype_problem,   -- a key's declared dtype against what the node accepts
}

-- The kit of the plugin file that calls new().
function M.new()
  local file = debug.getinfo(2, "S").source
  local kit = {}
  for k, v in pairs(shared) do kit[k] = v end

  -- kit.fail(who, fmt, ...): raises "tensordict: <who>: <message>" at the user's line.
  -- who is a node (its type name is used) or a name such as "physics.speed"; fmt is
  -- formatted with the arguments when there are any. Call it as a statement: after
  -- `return kit.fail(...)` Lua keeps no frame of the plugin to step over.
  function kit.fail(who, fmt, ...)
    local msg = select("#", ...) > 0 and fmt:format(...) or fmt
    util.fail_beyond(name_of(who) .. ": " .. msg, file)
  end

  -- kit.get(node, td, key): the value at key (a string or a key path), or the node's
  -- error naming the key and the batch's keys, as the built-in nodes say it.
  function kit.get(node, td, key)
    local v = td:get(key)
    if v == nil then kit.fail(node, core.missing_key(td, key)) end
    return v
  end

  -- kit.require_keys(node, td, keys): raises like kit.get for the first key td lacks.
  function kit.require_keys(node, td, keys)
    for i = 1, #keys do
      if td:get(keys[i]) == nil then kit.fail(node, core.missing_key(td, keys[i])) end
    end
  end

  -- kit.write_file(path, content [, {fsync = true, who =}]): content (a string, or a
  -- function writer(write) that calls write(text) for each piece) becomes the whole
  -- file at path, committed as every save of the library is: a temporary sibling,
  -- fsync, rename. If the writer raises, the error propagates and path is untouched;
  -- after any failure or a crash path holds its old content or nothing. who names the
  -- writer in errors (default "write_file").
  function kit.write_file(path, content, opts)
    opts = util.options("write_file", opts, WRITE_OPTIONS)
    local who = opts.who or "write_file"
    if type(path) ~= "string" or path == "" then
      kit.fail(who, "the path must be a non-empty string, got %s", util.describe(path))
    end
    local text = content
    if type(content) == "function" then
      local pieces = {}
      content(function(piece)
        if type(piece) ~= "string" and type(piece) ~= "number" then
          kit.fail(who, "write(text): expected a string, got %s", util.describe(piece))
        end
        pieces[#pieces + 1] = piece
      end)
      text = table.concat(pieces)
    elseif type(content) ~= "string" then
      kit.fail(who, "the content must be a string or a function writer(write), got %s", util.describe(content))
    end
    local ok, err = fs.write_atomic(path, text, opts.fsync)
    if not ok then kit.fail(who, err) end
    return true
  end

  return kit
end

return M

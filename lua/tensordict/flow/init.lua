-- tensordict.flow: pipeline nodes (docs/flow.md).
--   local flow = require("tensordict.flow")   -- also T.flow
-- A node is a callable table with in_keys and out_keys: node(td) returns a TensorDict
-- or nil (the batch is dropped). Sources yield batches, sinks take them, flow.Seq
-- composes nodes and flow.run drives a pipeline. Every built-in type is registered by
-- name, so flow.build(node:spec()) makes an equal node.
local core = require("tensordict.flow.core")

local flow = {
  PROTOCOL_VERSION = core.PROTOCOL_VERSION,
  define = core.define,
  register = core.register,
  build = core.build,
  register_function = core.register_function,
  register_factory = require("tensordict.flow.fn_args").register, -- functions with args in recipes
  resolve_function = core.resolve_function,
  is_node = core.is_node,
  registry = core.registry,
  functions = core.functions,
  type_names = core.type_names,
  KeySet = core.KeySet,
}

flow.Seq = require("tensordict.flow.seq")
flow.run = require("tensordict.flow.run").run
flow.kit = require("tensordict.flow.kit") -- the plugin API: flow.kit.new() in a plugin file
flow.expr = require("tensordict.flow.expr").fn -- flow.expr("abs(x) < 3") -> fn(td), docs/recipes.md

-- Built-in node types: each module defines its types with core.define.
-- flow.builtin maps their names to the module file that defines them.
flow.builtin = { Seq = "seq.lua" }
for _, name in ipairs({ "apply", "batching", "masking", "sources", "map", "memmap", "stats",
  "csv", "synthetic", "device", "npy", "h5", "eval", "nan" }) do
  for export, value in pairs(require("tensordict.flow." .. name)) do
    -- types, and helpers such as flow.RunningStats; the sources' own helpers stay inside
    if export ~= "row_batches" and export ~= "copy_position" then flow[export] = value end
    if core.registry[export] == value then flow.builtin[export] = name .. ".lua" end
  end
end

-- flow.<Type> reaches every registered type, plugins' included.
return (setmetatable(flow, { __index = function(_, k) return core.registry[k] end }))

-- flow/core_plugin.lua: the built-in node types as a plugin, registered through the
-- same loader as third-party plugins (host/plugins.lua), so they have the same powers and
-- `tdflow plugins` lists them with their origin.
local flow = require("tensordict.flow")
local core = require("tensordict.flow.core")

local nodes = {}
for name in pairs(flow.builtin) do nodes[name] = core.registry[name] end

return {
  name = "core",
  version = tostring(flow.PROTOCOL_VERSION),
  doc = "the built-in steps: apply, map, batching, masking, memmap, statistics, sources and sinks",
  nodes = nodes,
  functions = {},
}

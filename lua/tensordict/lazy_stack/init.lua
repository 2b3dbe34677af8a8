-- tensordict.lazy_stack: Python's LazyStackedTensorDict, complete: the class
-- (lazy_stack/core.lua), its operations (ops.lua) and its files (io.lua), which add
-- their methods when they load. Returns core's module (lazy_stack, is_lazy_stack, ...).
local core = require("tensordict.lazy_stack.core")
require("tensordict.lazy_stack.ops")
require("tensordict.lazy_stack.io")
return core

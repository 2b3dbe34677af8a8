-- tensordict.dict: the TensorDict class, complete. dict/core.lua defines the container
-- handle and its method table; the other files of this folder add their methods when
-- they load. Requiring this module (not core.lua) loads them all, so a module above
-- this layer gets every method without knowing which file defines it. Returns core's
-- module (is_td, wrap, methods, ...).
local core = require("tensordict.dict.core")
require("tensordict.dict.index") -- indexing and shape ops
require("tensordict.dict.struct")
require("tensordict.dict.apply")
require("tensordict.dict.entries") -- setdefault, popitem, split_keys, unlocked, ...
require("tensordict.dict.fill") -- zero_, fill_, copy_, update_at_
require("tensordict.dict.gather")
require("tensordict.dict.shared") -- share_memory_, is_shared
require("tensordict.dict.auto_batch")
require("tensordict.dict.print")
require("tensordict.dict.math")
require("tensordict.dict.join")
require("tensordict.dict.memmap")
require("tensordict.dict.npz") -- td:save_npz (T.load_npz in the facade)
require("tensordict.dict.map") -- td:map over worker processes
require("tensordict.dict.map_iter") -- td:map_iter: the chunks of td:map one by one
require("tensordict.dict.dim_ops") -- cumsum, softmax, repeat, ... over batch dims
require("tensordict.dict.torchlike") -- where, flip, roll, new_zeros, ..., zeros_like, addcmul
require("tensordict.dict.convert") -- td:float(), ..., td:tolist()
require("tensordict.dict.record") -- T.record (Python's @tensorclass)
require("tensordict.dict.device") -- td:to(device), td:cuda(), td:cpu(), td:pin_memory()
return core

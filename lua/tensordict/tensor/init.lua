-- tensordict.tensor: the tensor class, complete. tensor/core.lua defines the class and
-- its metatable; the other files of this folder add their methods to it when they
-- load. Requiring this module (not core.lua) loads them all, so a module above this
-- layer gets every method without knowing which file defines it. Returns core's module.
local core = require("tensordict.tensor.core")
require("tensordict.tensor.create")
require("tensordict.tensor.index")
require("tensordict.tensor.dtype")
require("tensordict.tensor.memory")
require("tensordict.tensor.ops")
require("tensordict.tensor.join")
require("tensordict.tensor.random")
require("tensordict.tensor.linalg")
require("tensordict.tensor.reduce") -- methods only
require("tensordict.tensor.tile") -- expand_as, repeat, repeat_interleave
require("tensordict.tensor.gather") -- methods only
require("tensordict.tensor.closeness") -- methods only: isclose, allclose, equal, nan_to_num, nansum, nanmean
require("tensordict.tensor.rearrange") -- methods only: flip, roll, tril, triu
require("tensordict.tensor.index_forms") -- methods only: scatter, index_add, index_fill, index_copy, take, ...
require("tensordict.tensor.combine") -- methods only: outer, diff, addcmul, addcdiv, addmm, tile
require("tensordict.tensor.sorting") -- sort .. bucketize (init.lua adds their T.<name> forms)
require("tensordict.tensor.scatter_reduce") -- methods only: scatter_add(_), scatter_reduce(_)
require("tensordict.tensor.matrix_forms") -- methods only: diag, trace, kron, cross
require("tensordict.tensor.sampling") -- bernoulli, multinomial (methods); normal (the facade's T.normal)
require("tensordict.tensor.method_forms") -- methods only: torch's other spellings and small forms
require("tensordict.tensor.statistics") -- methods only: cov, corrcoef, dist, cdist
require("tensordict.tensor.npy") -- t:save_npy (T.load_npy in the facade)
require("tensordict.tensor.cuda")
return core

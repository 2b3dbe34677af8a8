-- tensordict.h5: HDF5 files in Python tensordict's layout (docs/h5.md): T.from_h5 (a
-- container read lazily) and td:to_h5 (an atomic save). Loaded on first use; the C side
-- (libtensordict_h5, linked with HDF5) is opened then.
local dict = require("tensordict.h5.dict")
local save = require("tensordict.h5.save")

return {
  from_h5 = dict.from_h5,
  to_h5 = save.to_h5,
  is_h5 = dict.is_h5,
}

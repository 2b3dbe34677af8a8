-- flow/device.lua: ToDevice, which moves every leaf of a batch to a device ("cpu",
-- "cuda", "cuda:N") in one pass (td:to). A CUDA device that is not available raises at
-- open (flow.run) or at the first batch (a direct call), with CUDA's reason.
local cuda = require("tensordict.tensor.cuda")
local td_device = require("tensordict.dict.device")
local core = require("tensordict.flow.core")

local ToDevice = core.define("ToDevice", {
  keeps_rows = true,
  doc = "Moves every leaf of the batch to a device (\"cpu\", \"cuda\", \"cuda:N\"), in one pass.",
  params = {
    { "device", "string", required = true, doc = "\"cpu\", \"cuda\" or \"cuda:N\"" },
    { "non_blocking", "boolean", default = false,
      doc = "queue copies from pinned memory without waiting (T.cuda.synchronize() waits)" },
  },
  examples = { 'flow.ToDevice{device = "cuda"}' },
})

function ToDevice:init()
  if not cuda.is_device_name(self.p.device) then
    self:fail("device: unknown device '%s' (expected 'cpu', 'cuda' or 'cuda:N')", self.p.device)
  end
end

-- Raises as the node when the device needs CUDA and CUDA is not there.
local function check_device(node, device)
  local ok, err = pcall(cuda.parse, "ToDevice", device)
  if not ok then node:fail("%s", (tostring(err):gsub("^.-tensordict: ToDevice: ", ""))) end
end
ToDevice.check_device = check_device

function ToDevice:open() check_device(self, self.p.device) end

function ToDevice:forward(td)
  if not self.checked then
    check_device(self, self.p.device)
    self.checked = true
  end
  return td_device.to(td, self.p.device, self.p.non_blocking, "ToDevice")
end

return { ToDevice = ToDevice }

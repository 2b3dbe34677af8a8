-- tensor/slots.lua: C references held by Lua handles, released once per GC cycle instead of
-- by a finaliser per handle.
--
-- A LuaJIT finaliser costs ~300 ns per object (ffi.gc registers the object in a weak
-- table, and the collector resurrects it, calls the function and frees it one cycle
-- later): three times the rest of `a + b` on 1000 floats. Here each handle takes a
-- slot instead: ptrs[slot] holds its C reference and live[slot] the handle itself,
-- weakly. Once per GC cycle (a small sentinel object's finaliser marks the end of one)
-- the slots whose handle was collected are swept: their references go back to C in
-- one call and the slots are reused. The weak entries are cleared in the same cycle
-- that finds a handle dead, before the finalisers run, so one full collection still
-- returns a dead handle's memory, as ffi.gc did. A closer object kept until the Lua
-- state closes releases the rest.
--
-- held[slot]: 0 free, 1 holding ptrs[slot], 2 released early (the handle's free()),
-- waiting for the handle to go before the slot is reused.
--
-- The sweep runs inside a finaliser, and compiled code moves the points where the
-- collector may run one: between any two statements of take(), in effect (a trace exits
-- at its GC check and the finaliser runs before the interpreter resumes with the values
-- the trace had already read). So no field is read-modify-written by both sides: the
-- sweep only turns held slots free (held 1 or 2 -> 0) and counts its runs in sweeps;
-- take() alone moves its cursor, which restarts from slot 1 after each sweep, and alone
-- appends slots. A stale read in take() can only make it skip a slot just freed.
local ffi = require("ffi")

local M = {}

local INITIAL = 1024

-- A registry for pointers of ptr_type ("td_tensor *"); release(ptrs, slots, n) returns
-- ptrs[slots[0 .. n-1]] to C and sets them to NULL. forget(slot), when given, is called
-- for each slot the sweep frees (what the owner keeps per slot goes with the handle).
function M.new(ptr_type, release, forget)
  local st = { live = setmetatable({}, { __mode = "v" }), held = {}, nslots = 0, cursor = 1,
               sweeps = 0, seen_sweeps = 0, cap = INITIAL, ptr_type = ptr_type, release = release }
  st.ptrs = ffi.new(ptr_type .. "[?]", INITIAL + 1)
  st.dead = ffi.new("int32_t[?]", INITIAL + 1)

  -- Runs inside a finaliser: no trace is recorded there, so this stays to plain table
  -- reads in the interpreter and leaves the C work to one call.
  function st.sweep()
    local live, held, dead = st.live, st.held, st.dead
    local n = 0
    for slot = 1, st.nslots do
      local h = held[slot]
      if (h == 1 or h == 2) and live[slot] == nil then
        if h == 1 then
          dead[n] = slot
          n = n + 1
        end
        if forget then forget(slot) end
        held[slot] = 0
      end
    end
    st.sweeps = st.sweeps + 1
    if n > 0 then st.release(st.ptrs, dead, n) end
  end

  local function on_cycle()
    st.sweep()
    ffi.gc(ffi.new("char[1]"), on_cycle) -- the next cycle's sentinel
  end
  ffi.gc(ffi.new("char[1]"), on_cycle)
  st.closer = ffi.gc(ffi.new("char[1]"), function()
    local n = 0
    for slot = 1, st.nslots do
      if st.held[slot] == 1 then
        st.dead[n] = slot
        n = n + 1
      end
      st.held[slot] = 0
    end
    if n > 0 then st.release(st.ptrs, st.dead, n) end
  end)
  return st
end

-- Doubles the arrays. The new ones are filled before they replace the old (a sweep run
-- by a GC step during the allocation reads consistent ones; a slot it frees in the old
-- array keeps a stale pointer in the new one, which nothing reads while held is 0).
local function grow(st)
  local cap = st.cap * 2
  local ptrs, dead = ffi.new(st.ptr_type .. "[?]", cap + 1), ffi.new("int32_t[?]", cap + 1)
  ffi.copy(ptrs, st.ptrs, ffi.sizeof(st.ptr_type) * (st.cap + 1))
  st.ptrs, st.dead, st.cap = ptrs, dead, cap
end

-- A free slot number, not yet held: the next free one from the cursor, or a new one.
function M.take(st)
  local sweeps = st.sweeps
  local slot = st.cursor
  if sweeps ~= st.seen_sweeps then -- slots were freed behind the cursor
    st.seen_sweeps = sweeps
    slot = 1
  end
  local held, n = st.held, st.nslots
  while slot <= n and held[slot] ~= 0 do slot = slot + 1 end
  if slot > n then
    slot = n + 1
    if slot > st.cap then grow(st) end
    held[slot] = 0
    st.nslots = slot
  end
  st.cursor = slot + 1
  return slot
end

-- Records that handle (made with slot) holds p. The handle is in live before the slot
-- is marked held: a sweep run by a GC step in between (any allocation may run one)
-- must not see a held slot with no handle.
function M.hold(st, slot, handle, p)
  st.live[slot] = handle
  st.ptrs[slot] = p
  st.held[slot] = 1
end

-- The handle's free() released p itself: the slot waits for the handle to go.
function M.released(st, slot)
  st.held[slot] = 2
  st.ptrs[slot] = nil
end

return M

-- Group commit: run several operations of one client in one script call (one round trip, one
-- EVALSHA), each exactly as its own script would run it. Not a Redisson script: it leaves the
-- same data, channels and messages as the scripts it carries, one after the other.
--
-- The client prepends one function with a branch per script a batch may carry, built from the
-- script files themselves (src/scripts/mod.rs, `batch_source`):
--     local function OP(op, k, a)
--     if op == 1 then <body of lua/lock.lua> elseif op == 2 then <body of lua/unlock.lua> ...
--     end end
-- with each `KEYS[n]` of a body read as `KEYS[k + n]` and each `ARGV[n]` as `ARGV[a + n]`,
-- so each operation's logic exists once, in its own file, and reads its keys and arguments
-- where they are in this call's KEYS and ARGV (no copy into tables of its own).
--
-- ARGV[1]  number of operations n
-- then per operation: a header of three bytes (the function's index, its number of keys, its
--          number of arguments), followed by its arguments
-- KEYS     every operation's keys, in order
--
-- Returns: an array of n replies, in order; an operation whose script fails (e.g. WRONGTYPE)
--          gets its error as its own reply, the others run and reply as usual.
local replies = {}
local byte = string.byte
local k, a = 0, 2
for i = 1, tonumber(ARGV[1]) do
    local op, nkeys, nargs = byte(ARGV[a], 1, 3)
    local ok, reply = pcall(OP, op, k, a)
    if not ok then
        if type(reply) == 'table' then
            replies[i] = reply
        else
            replies[i] = {err = tostring(reply)}
        end
    elseif reply == nil then
        -- A nil inside the array would end it: false is the same nil reply on the wire.
        replies[i] = false
    else
        replies[i] = reply
    end
    k = k + nkeys
    a = a + 1 + nargs
end
return replies

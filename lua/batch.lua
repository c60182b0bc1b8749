-- Group commit: run several operations of one client in one script call (one round trip, one
-- EVALSHA), each exactly as its own script would run it. Not a Redisson script: it leaves the
-- same data, channels and messages as the scripts it carries, one after the other.
--
-- The client prepends one function per script a batch may carry, built from the script files
-- themselves (src/scripts/mod.rs, `batch_source`):
--     OPS[i] = function(KEYS, ARGV) <body of lua/<script>.lua> end
-- so each operation's logic exists once, in its own file.
--
-- ARGV[1]  number of operations n
-- then per operation: the function's index, its number of keys, its number of arguments,
--          followed by its arguments
-- KEYS     every operation's keys, in order
--
-- Returns: an array of n replies, in order; an operation whose script fails (e.g. WRONGTYPE)
--          gets its error as its own reply, the others run and reply as usual.
local replies = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
    local op, nkeys, nargs = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local keys, args = {}, {}
    for j = 1, nkeys do
        keys[j] = KEYS[k + j - 1]
    end
    for j = 1, nargs do
        args[j] = ARGV[a + j - 1]
    end
    k = k + nkeys
    a = a + nargs
    local ok, reply = pcall(OPS[op], keys, args)
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
end
return replies

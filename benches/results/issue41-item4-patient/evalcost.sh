# Server CPU per call: EVAL of an empty script, of one redis.call, and a plain SET, on each server.
for srv in /usr/bin/redis-server $(pwd)/target/valkey-9.1.2/valkey-server; do
  port=$((20000 + RANDOM % 10000))
  taskset -c 0 $srv --port $port --save '' --appendonly no --daemonize no > /dev/null 2>&1 &
  pid=$!; sleep 0.5
  r() { redis-cli -p $port "$@"; }
  e0=$(r script load "return 1"); e1=$(r script load "return redis.call('exists', KEYS[1])"); e3=$(r script load "redis.call('exists', KEYS[1]); redis.call('exists', KEYS[1]); return redis.call('exists', KEYS[1])")
  for t in "SET k v" "EVALSHA $e0 1 k" "EVALSHA $e1 1 k" "EVALSHA $e3 1 k"; do
    r config resetstat > /dev/null
    taskset -c 1 redis-benchmark -p $port -n 300000 -P 32 -c 4 -q $t > /dev/null 2>&1
    cmd=$(echo $t | cut -d' ' -f1 | tr A-Z a-z)
    echo "$(basename $srv) | $t | $(r info commandstats | grep "cmdstat_$cmd:" | grep -o 'usec_per_call=[0-9.]*') | $(r info commandstats | grep 'cmdstat_exists:' | grep -o 'usec_per_call=[0-9.]*')"
  done
  kill $pid; wait $pid 2>/dev/null
done

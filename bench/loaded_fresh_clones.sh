#!/usr/bin/env bash
# #53's loaded check: two fresh clones of REPO, each running `make tune && make test`, side by side with a CPU
# burner, so that each has two other CPU-heavy jobs beside it. Logs, times and the load average (every 30 s) go
# to OUT. Usage: bench/loaded_fresh_clones.sh [REPO] [OUT]   (about 40 minutes on the 2-core VM)
set -u
repo=$(realpath "${1:-.}")
out=$(realpath -m "${2:-/tmp/loaded}")
mkdir -p "$out"
for clone in A B; do
    rm -rf "$out/fresh$clone"
    git clone -q "$repo" "$out/fresh$clone"
done
timeout 3600 python3 -c "while True: pass" &
burner=$!
run() {
    cd "$out/fresh$1" && /usr/bin/time -o "$out/$1.time" -f '%e s wall' bash -c \
        "make tune > '$out/$1.tune.log' 2>&1; echo tune-rc=\$? >> '$out/$1.tune.log'; make test > '$out/$1.test.log' 2>&1; echo test-rc=\$? >> '$out/$1.test.log'"
}
run A &
a=$!
sleep 20
run B &
b=$!
while kill -0 "$a" 2> /dev/null || kill -0 "$b" 2> /dev/null; do
    echo "$(date +%T) $(cat /proc/loadavg)" >> "$out/loadavg"
    sleep 30
done
kill "$burner"
tail -n 3 "$out"/A.test.log "$out"/B.test.log

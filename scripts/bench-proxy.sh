#!/usr/bin/env bash
# bench-proxy.sh measures the verifier's proxy mode against a bare Go
# reverse proxy (internal/benchtools/bareproxy) in front of the same tiny
# upstream, with wrk, in alternating rounds so that whatever else the
# machine does falls on every side alike. For each side it prints the
# median requests/s, the ratio to the bare proxy, the CPU time per request
# (utime+stime from /proc/PID/stat over the rounds, divided by the
# requests) and the peak RSS (VmHWM).
#
# Sides: bare; verifier with its token cache (the default --cache-size)
# and the access log on at info (to a file); verifier with --cache-size 0.
#
# Environment: ROUNDS (3), DURATION (5s), CONNECTIONS (64), THREADS (2),
# BASE_PORT (18080; six ports from it are used), VERIFIER_GOMEMLIMIT
# (passed to the verifiers as GOMEMLIMIT; unset by default, when they run with
# no soft memory limit outside a container).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
BASE_PORT=${BASE_PORT:-18080}

cd "$(dirname "$0")/.."

if ! command -v wrk >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "bench-proxy: wrk not found; installing it with apt-get" >&2
		apt-get install -y wrk >/dev/null
	else
		echo "bench-proxy: SKIPPED: wrk is not installed (apt-get install wrk)" >&2
		exit 2
	fi
fi

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "building bin/verifier and the bench tools..." >&2
mkdir -p bin
go build -trimpath -ldflags "-s -w" -o bin/verifier ./cmd/verifier
for tool in bareproxy upstream benchtoken; do
	go build -trimpath -ldflags "-s -w" -o "$work/$tool" "./internal/benchtools/$tool"
done

up=127.0.0.1:$BASE_PORT
bare=127.0.0.1:$((BASE_PORT + 1))
ver=127.0.0.1:$((BASE_PORT + 2))
nocache=127.0.0.1:$((BASE_PORT + 3))
admin=127.0.0.1:$((BASE_PORT + 4))
admin2=127.0.0.1:$((BASE_PORT + 5))

token=$("$work/benchtoken" -jwks "$work/jwks.json" -issuer http://issuer.bench -audience api)

"$work/upstream" -listen "$up" &
pids+=($!)
"$work/bareproxy" -listen "$bare" -upstream "http://$up" &
bare_pid=$!
pids+=($bare_pid)
verifier_env=()
if [ -n "${VERIFIER_GOMEMLIMIT:-}" ]; then verifier_env=(GOMEMLIMIT="$VERIFIER_GOMEMLIMIT"); fi
verifier_flags=(serve --mode proxy --upstream "http://$up" --jwks-file "$work/jwks.json"
	--issuer http://issuer.bench --audience api --log-level info)
env "${verifier_env[@]}" bin/verifier "${verifier_flags[@]}" --listen "$ver" --admin-listen "$admin" >"$work/verifier.log" 2>&1 &
ver_pid=$!
pids+=($ver_pid)
env "${verifier_env[@]}" bin/verifier "${verifier_flags[@]}" --listen "$nocache" --admin-listen "$admin2" --cache-size 0 >"$work/nocache.log" 2>&1 &
nocache_pid=$!
pids+=($nocache_pid)

wait_ok() { # url [header]
	for _ in $(seq 100); do
		if curl -fsS -o /dev/null ${2:+-H "$2"} "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "bench-proxy: $1 did not answer 200" >&2
	exit 1
}
wait_ok "http://$admin/readyz"
wait_ok "http://$admin2/readyz"
wait_ok "http://$bare/"
wait_ok "http://$ver/" "Authorization: Bearer $token"
wait_ok "http://$nocache/" "Authorization: Bearer $token"

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime
declare -A rps cpu reqs
names=(bare verifier verifier-nocache)
declare -A addr=([bare]=$bare [verifier]=$ver [verifier-nocache]=$nocache)
declare -A pid=([bare]=$bare_pid [verifier]=$ver_pid [verifier-nocache]=$nocache_pid)

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$ROUNDS"); do
	for name in "${names[@]}"; do
		before=$(cpu_ticks "${pid[$name]}")
		out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -H "Authorization: Bearer $token" "http://${addr[$name]}/orders")
		after=$(cpu_ticks "${pid[$name]}")
		if grep -q "Non-2xx" <<<"$out"; then
			echo "bench-proxy: $name answered errors:" >&2
			echo "$out" >&2
			exit 1
		fi
		r=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		n=$(awk '/requests in/ {print $1}' <<<"$out")
		rps[$name]="${rps[$name]:-} $r"
		cpu[$name]=$(( ${cpu[$name]:-0} + after - before ))
		reqs[$name]=$(( ${reqs[$name]:-0} + n ))
		printf 'round %d %-17s %10.0f req/s\n' "$round" "$name" "$r" >&2
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
hwm() { awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

bare_median=$(median <<<"${rps[bare]}")
printf '\n%-17s %12s %7s %12s %14s\n' side "median req/s" ratio "CPU us/req" "peak RSS MiB"
for name in "${names[@]}"; do
	m=$(median <<<"${rps[$name]}")
	awk -v n="$name" -v m="$m" -v b="$bare_median" -v c="${cpu[$name]}" -v t="$ticks" -v q="${reqs[$name]}" -v h="$(hwm "${pid[$name]}")" \
		'BEGIN {printf "%-17s %12.0f %7.2f %12.1f %14s\n", n, m, m / b, c * 1e6 / t / q, h}'
done
lines=$(grep -c '"msg":"request"' "$work/verifier.log" || true)
echo "(verifier access log: $lines request lines written for ${reqs[verifier]} wrk requests plus the warm-up)"

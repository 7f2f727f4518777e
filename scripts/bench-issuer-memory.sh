#!/usr/bin/env bash
# bench-issuer-memory.sh measures the issuer's memory and login throughput
# under a flood of concurrent logins (internal/benchtools/loginflood): it
# builds bin/issuer as make build does, starts it on a fresh SQLite file
# with every rate limit lifted, registers one user and has CLIENTS clients
# log in as that user for DURATION. Each round prints logins/s, the
# issuer's CPU time per login (utime+stime from /proc/PID/stat: on a shared
# machine logins/s follows the neighbours, CPU per login does not), the
# peak RSS (VmHWM) and how long after the flood the RSS took to fall under
# AFTER_MIB.
#
# Sides, in alternating rounds so that whatever else the machine does falls
# on all alike: "limit" is the issuer as shipped (its derived soft memory
# limit); "nolimit" runs it with GOMEMLIMIT=off (the slots still keep their
# argon2 memory: that is not an environment setting); "baseline", when
# BASELINE names another issuer binary, runs that one as it ships (for
# example the issuer before its memory was bounded:
#   git worktree add /tmp/before fb207a3^ &&
#   (cd /tmp/before && go build -o "$PWD/bin/issuer-before" ./cmd/issuer)
# then BASELINE=bin/issuer-before). Each side runs with the default
# --hash-queue (64: the clients past it get 503 and retry after
# Retry-After). With --hash-queue 0 (all clients queued inside the issuer at
# once) the issuer derives no limit, so that case runs once per round, as
# shipped.
#
# The issuer as shipped with the default queue is held to the targets: a
# peak over PEAK_MIB, or an RSS not back under AFTER_MIB within SETTLE,
# fails the script once every round has run. The other sides only report.
#
# Environment: ROUNDS (2), CLIENTS (500), DURATION (20s), SETTLE (60s: how
# long to wait for the RSS to fall), AFTER_MIB (48), PEAK_MIB (96), BASELINE (none),
# DATABASE_URL (a PostgreSQL URL to run on it instead of SQLite; its users
# table must not hold flood@example.com with another password, and its
# signing key is sealed under bin/loginflood.kek, made by the first run).
set -euo pipefail

ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-500}
DURATION=${DURATION:-20s}
SETTLE=${SETTLE:-60s}
AFTER_MIB=${AFTER_MIB:-48}
PEAK_MIB=${PEAK_MIB:-96}

cd "$(dirname "$0")/.."

go build -trimpath -ldflags "-s -w" -o bin/issuer ./cmd/issuer
go build -o bin/loginflood ./internal/benchtools/loginflood

failed=()
db=()
if [ -n "${DATABASE_URL:-}" ]; then
	# The database keeps the signing key sealed under the first run's
	# key-encryption key: every later run needs the same one.
	db=(-database-url "$DATABASE_URL" -kek-file bin/loginflood.kek)
fi

for round in $(seq "$ROUNDS"); do
	for queue in 64 0; do
		sides=(limit nolimit)
		if [ -n "${BASELINE:-}" ]; then sides+=(baseline); fi
		if [ "$queue" = 0 ]; then sides=(shipped); fi
		for side in "${sides[@]}"; do
			env=()
			issuer=bin/issuer
			case "$side" in
			nolimit) env=(-issuer-env GOMEMLIMIT=off) ;;
			baseline) issuer=$BASELINE ;;
			esac
			echo "== round $round, --hash-queue $queue, $side"
			held=() # the shipped side is held to the peak target too
			if [ "$side" = limit ]; then held=(-max-peak "$PEAK_MIB"); fi
			./bin/loginflood -issuer "$issuer" "${db[@]}" "${env[@]}" "${held[@]}" \
				-issuer-flags "--hash-queue $queue" -clients "$CLIENTS" \
				-duration "$DURATION" -settle "$SETTLE" -max-after "$AFTER_MIB" ||
				if [ "$side" = limit ]; then failed+=("round $round"); fi
		done
	done
done
if [ "${#failed[@]}" -gt 0 ]; then
	echo "FAIL: the shipped issuer missed a target (peak <= $PEAK_MIB MiB, back under $AFTER_MIB MiB within $SETTLE) in: ${failed[*]}"
	exit 1
fi

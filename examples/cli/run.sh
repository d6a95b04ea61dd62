#!/usr/bin/env bash
# Pollux from the shell: curl against the HTTP front door, and the nats CLI
# (github.com/nats-io/natscli, v0.5.0) on the subjects and streams.
#
#   NATS_URL=nats://127.0.0.1:4222 POLLUX_HTTP_URL=http://127.0.0.1:8081 examples/cli/run.sh
#
# It submits a job over HTTP (twice, with one Idempotency-Key: one job),
# follows it over Server-Sent Events to its terminal event, submits a slow
# job with `nats pub` and cancels it over HTTP, replays both jobs' events
# with `nats sub` and checks they are the ones the front door streamed, and
# checks the front door's errors. It exits 0 when everything matches, 1 at
# the first mismatch (saying which), 2 when something it needs is missing.
#
# Environment: NATS_URL, POLLUX_HTTP_URL (both required), POLLUX_ROUTE (sim),
# POLLUX_MODEL (pollux-demo/preview), POLLUX_SLOW_MODEL (pollux-demo/long: a
# model slow enough to cancel), POLLUX_TIMEOUT_S (120), POLLUX_PREFIX
# (pollux), NATS_CLI (nats: the nats CLI to run).
#
# It reads JSON with grep and cut to need nothing but bash, curl and nats,
# which works for the flat fields of Pollux's own answers; use jq in your
# own scripts.
set -euo pipefail

: "${NATS_URL:?set NATS_URL to the NATS server Pollux uses, e.g. nats://127.0.0.1:4222}"
: "${POLLUX_HTTP_URL:?set POLLUX_HTTP_URL to the Pollux front door, e.g. http://127.0.0.1:8081}"
export NATS_URL
route=${POLLUX_ROUTE:-sim}
model=${POLLUX_MODEL:-pollux-demo/preview}
slow_model=${POLLUX_SLOW_MODEL:-pollux-demo/long}
timeout=${POLLUX_TIMEOUT_S:-120}
prefix=${POLLUX_PREFIX:-pollux}
nats=${NATS_CLI:-nats}
stream="$(tr 'a-z-' 'A-Z_' <<<"$prefix")_EVENTS"
for tool in curl "$nats"; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found (make tools installs the nats CLI into bin/)" >&2; exit 2; }
done

run="cli-$(date +%s)-$$"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

fail() { echo "FAIL $*" >&2; exit 1; }
step() { echo "-- $*"; }

# http METHOD PATH [BODY] [CURL ARGS...]: the response body goes to
# $work/body, the status to stdout.
http() {
	local method=$1 path=$2 body=${3-}
	shift 3 || shift $#
	local args=(-sS -X "$method" -o "$work/body" -w '%{http_code}' "$@")
	if [[ -n $body ]]; then args+=(-H 'Content-Type: application/json' --data-binary "$body"); fi
	curl "${args[@]}" "$POLLUX_HTTP_URL$path"
}

# field NAME [FILE]: the first "NAME":"value" string of a JSON document.
field() { grep -o "\"$1\":\"[^\"]*\"" "${2:-$work/body}" | head -n1 | cut -d'"' -f4; }

# expect STATUS CODE FIELD ACTUAL_STATUS: check an error answer.
expect_error() {
	local want=$1 code=$2 fld=$3 got=$4
	[[ $got == "$want" ]] || fail "want HTTP $want ($code), got $got: $(cat "$work/body")"
	[[ $(field code) == "$code" ]] || fail "want error code $code: $(cat "$work/body")"
	[[ -z $fld || $(field field) == "$fld" ]] || fail "want error field $fld: $(cat "$work/body")"
}

# follow ID FILE: the job's events over SSE, one "<event id> <type> <seq>"
# line each, until the server ends the stream after the terminal event.
follow() {
	curl -sSN --max-time "$timeout" "$POLLUX_HTTP_URL/v1/jobs/$1/events?route=$route" |
		awk '/^id: /{id=$2} /^event: /{type=$2} /^data: /{match($0, /"seq":[0-9]+/); print id, type, substr($0, RSTART+6, RLENGTH-6); fflush()}' >"$2" || true
}

# check_events ID FILE: the events are in order and the last is terminal.
check_events() {
	local id=$1 file=$2
	[[ -s $file ]] || fail "job $id: no events within ${timeout}s"
	awk -v id="$id" 'NR > 1 && ($1 <= prev_id || $3 != prev_seq + 1) { print "job " id ": event " $0 " after " prev_id " seq " prev_seq; bad = 1 }
		{ prev_id = $1; prev_seq = $3 } END { exit bad }' "$file" >&2 || fail "job $id: events out of order"
	last=$(tail -n1 "$file" | cut -d' ' -f2)
	case $last in
	succeeded | failed | canceled | expired | lost) ;;
	*) fail "job $id: the stream ended at a $last event, not a terminal one" ;;
	esac
}

# replay ID FILE: the job's events replayed from the events stream with the
# nats CLI, one "<type> <seq>" line each, duplicates dropped.
replay() {
	"$nats" sub --stream "$stream" "$prefix.events.$route.$1" --all --raw -T --wait 10s 2>/dev/null |
		grep '^{' | sed -E 's/.*"type":"([a-z]+)","seq":([0-9]+).*/\1 \2/' | awk '!seen[$2]++' >"$2"
}

step "submit over HTTP with an Idempotency-Key, twice"
body='{"route":"'$route'","v":1,"model":"'$model'","input":{"prompt":"a red kite over the sea"},"timeout_s":600,"metadata":{"run":"'$run'"}}'
status=$(http POST /v1/jobs "$body" -H "Idempotency-Key: $run-kite")
[[ $status == 202 ]] || fail "submit: HTTP $status: $(cat "$work/body")"
id=$(field id)
[[ $(field events) == "/v1/jobs/$id/events?route=$route" ]] || fail "submit: events link: $(cat "$work/body")"
status=$(http POST /v1/jobs "$body" -H "Idempotency-Key: $run-kite")
[[ $status == 202 && $(field id) == "$id" ]] || fail "resubmit: HTTP $status, $(cat "$work/body"), want job $id again"
echo "job $id"

step "follow it over Server-Sent Events to its terminal event"
follow "$id" "$work/kite.sse"
check_events "$id" "$work/kite.sse"
final=$(tail -n1 "$work/kite.sse" | cut -d' ' -f2)
echo "$(wc -l <"$work/kite.sse") events: $(cut -d' ' -f2 "$work/kite.sse" | paste -sd' ' -)"
status=$(http GET "/v1/jobs/$id")
[[ $status == 200 ]] || fail "get: HTTP $status"
grep -q "\"state\":\"$final\"" "$work/body" || fail "get: the record is not $final: $(cat "$work/body")"
[[ $(field idempotency_key) == "$run-kite" ]] || fail "get: idempotency key: $(cat "$work/body")"

step "submit a slow job with nats pub, cancel it over HTTP"
slow="$run-slow"
follow "$slow" "$work/slow.sse" &
follower=$!
"$nats" pub -J -q "$prefix.submit.$route" \
	'{"v":1,"id":"'$slow'","model":"'$slow_model'","input":{"prompt":"a long take"},"timeout_s":600}' >/dev/null
for ((i = 0; i < timeout * 10; i++)); do
	[[ -s $work/slow.sse ]] && break # its first event: the provider has it
	sleep 0.1
done
status=$(http POST "/v1/jobs/$slow/cancel" '{"reason":"changed my mind"}')
[[ $status == 202 ]] || fail "cancel: HTTP $status: $(cat "$work/body")"
wait "$follower"
check_events "$slow" "$work/slow.sse"
[[ $(tail -n1 "$work/slow.sse" | cut -d' ' -f2) == canceled ]] || fail "job $slow: ended $(tail -n1 "$work/slow.sse"), want canceled"
status=$(http POST "/v1/jobs/$slow/cancel" '')
expect_error 409 job_terminal "" "$status"
echo "job $slow canceled"

step "replay both jobs' events with the nats CLI"
for job in "$id" "$slow"; do
	replay "$job" "$work/replayed"
	cut -d' ' -f2- "$work/$([[ $job == "$id" ]] && echo kite || echo slow).sse" >"$work/streamed"
	diff -u "$work/streamed" "$work/replayed" >&2 || fail "job $job: the replay differs from the stream"
done
since=$("$nats" sub --stream "$stream" "$prefix.events.$route.*" --since 10m --raw -T --wait 10s 2>/dev/null | grep -c "\"job_id\":\"\\($id\\|$slow\\)\"" || true)
[[ $since -ge 2 ]] || fail "replay since 10m: found $since events of the two jobs"
echo "replayed; $since events of the two jobs in the last 10 minutes"

step "errors are JSON with stable codes"
expect_error 400 invalid_field model "$(http POST /v1/jobs '{"route":"'$route'","v":1,"input":{}}')"
expect_error 404 unknown_route route "$(http POST /v1/jobs '{"route":"no-such-route","v":1,"model":"m","input":{}}')"
expect_error 404 job_not_found "" "$(http GET "/v1/jobs/$run-nope")"
expect_error 405 method_not_allowed "" "$(http DELETE "/v1/jobs/$id")"

echo "ok: job $id $final, job $slow canceled, replays match"

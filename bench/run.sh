#!/usr/bin/env bash
# bench/run.sh: the benchmark of issue 6. Builds the release binary with
# build.sh (and build.sh --tiny for the size table), runs the #[ignore]d
# measurements of tests/bench.rs against the fake herdr server, and writes
# the tables to BENCH.md.
#
#   bash bench/run.sh            full run (about 4 minutes on 2 cores, of
#                                which 60 s is the idle measurement)
#   bash bench/run.sh --quick    small counts, under 30 s once built; writes
#                                ${CARGO_TARGET_DIR:-target}/bench/BENCH.quick.md
#                                so that BENCH.md keeps the real numbers
#   --out FILE                   write the report to FILE instead
#
# Honours CARGO_TARGET_DIR (as build.sh does). Needs bash, cargo, awk; uses
# python3 for the Python floor when it is installed (says so when not).
# Exits non-zero when a build or a measurement fails (a missed goal is not a
# failure: it is reported in the tables).

set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
out=
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --out) out=${2:?--out needs a file}; shift ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/run.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

target_dir=${CARGO_TARGET_DIR:-target}
if [ -z "$out" ]; then
    if [ "$quick" = 1 ]; then
        mkdir -p "$target_dir/bench"
        out=$target_dir/bench/BENCH.quick.md
    else
        out=BENCH.md
    fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cowbell-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results.txt
: > "$results"

say() { printf 'bench/run.sh: %s\n' "$*" >&2; }
began=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
failed=

# ---------------------------------------------------------------------------
# 1. Sizes: build.sh --tiny first, then build.sh, so that bin/cowbell is the
# normal static build the other measurements run.
# ---------------------------------------------------------------------------

# build <label> <goal KiB> [build.sh args]
build() {
    local label=$1 goal_kib=$2
    shift 2
    local log=$work/build-$label.log
    say "sh build.sh $* (log: $log)"
    if ! sh build.sh "$@" </dev/null >"$log" 2>&1; then
        cat "$log" >&2
        say "build.sh $* failed"
        failed="$failed build($label)"
        return 1
    fi
    local size kib linkage what note=-
    size=$(wc -c < bin/cowbell | tr -d ' ')
    kib=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1024 }')
    linkage=$(sed -n 's/^build\.sh: size: .*; linkage: //p' "$log" | tail -1)
    what=$(sed -n 's/^build\.sh: built bin\/cowbell: \([^,]*\).*/\1/p' "$log" | tail -1)
    if grep -q 'falling back to the normal build' "$log"; then
        note="no_tiny_build_possible:_$(grep -m1 -- '--tiny needs' "$log" | sed 's/^build\.sh: //')"
        note=${note%%(*}
    fi
    local verdict=met
    [ "$size" -le $((goal_kib * 1024)) ] || verdict=MISSED
    printf 'BENCH size command=sh_build.sh%s built=%s size_bytes=%s size_KiB=%s linkage=%s goal_KiB=%s goal=%s note=%s\n' \
        "${1:+_$1}" "${what// /_}" "$size" "$kib" "${linkage// /_}" "$goal_kib" "$verdict" "${note// /_}" \
        >> "$results"
}

build tiny 128 --tiny || true
build normal 480 || true
[ -x bin/cowbell ] || { say "no bin/cowbell; cannot measure"; exit 1; }

# ---------------------------------------------------------------------------
# 2-7: the daemon against the fake server (tests/bench.rs).
# ---------------------------------------------------------------------------

python_note="python3 not found: the Python floor is not measured"
python_bin=
if command -v python3 >/dev/null 2>&1; then
    # A pyenv (or similar) shim is a shell script: resolve the interpreter
    # itself, so the floor is Python's start and not the shim's.
    if python_bin=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$python_bin" ]; then
        python_note="python3 is $(command -v python3), interpreter measured: $python_bin ($("$python_bin" -V 2>&1))"
    else
        python_bin=
        python_note="python3 on PATH does not run: the Python floor is not measured"
    fi
fi

say "compiling the measurements (cargo test --release --test bench --no-run)"
compile_began=$(date +%s)
cargo test --release --test bench --no-run </dev/null >"$work/compile.log" 2>&1 \
    || { cat "$work/compile.log" >&2; say "compiling tests/bench.rs failed"; exit 1; }
compile_s=$(( $(date +%s) - compile_began ))

say "running the measurements$([ "$quick" = 1 ] && echo ' (quick)')"
measure_began=$(date +%s)
set +e
COWBELL_BENCH_BIN=$PWD/bin/cowbell \
COWBELL_BENCH_QUICK=$quick \
COWBELL_BENCH_PYTHON=${python_bin:-python3-missing} \
    cargo test --release --test bench -- --ignored --nocapture --test-threads=1 \
    </dev/null 2>&1 | tee "$work/measure.log" | grep --line-buffered -E '^(test |BENCH )|BENCH |panicked' >&2
status=${PIPESTATUS[0]}
set -e
measure_s=$(( $(date +%s) - measure_began ))
# A BENCH line may follow "test name ... " on the same line.
grep -o 'BENCH .*' "$work/measure.log" >> "$results" || true
if [ "$status" != 0 ]; then
    failed="$failed measurements"
    grep -E 'panicked|FAILED|failures:' "$work/measure.log" >&2 || true
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
total_s=$(( $(date +%s) - began ))

# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

# table <id>: the BENCH lines of one table as a Markdown table. Keys become
# the header; `_` reads as a space; `a~b~c` as "a (b–c)".
table() {
    awk -v id="$1" '
        $1 == "BENCH" && $2 == id {
            n++; hdr = ""; sep = ""; row = ""
            for (i = 3; i <= NF; i++) {
                eq = index($i, "=")
                k = substr($i, 1, eq - 1); v = substr($i, eq + 1)
                gsub(/_/, " ", k); gsub(/_/, " ", v)
                if (split(v, a, "~") == 3) v = a[1] " (" a[2] "–" a[3] ")"
                hdr = hdr "| " k " "; sep = sep "| --- "; row = row "| " v " "
            }
            if (n == 1) { print hdr "|"; print sep "|" }
            print row "|"
        }
        END { if (!n) print "_No result: this measurement failed; see the output of bench/run.sh._" }
    ' "$results"
}

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
[ -n "$cpu_model" ] || cpu_model=unknown
missed=$(grep -c 'MISSED' "$results" || true)
mode_words="full run"
[ "$quick" = 1 ] && mode_words="QUICK run (small counts: a smoke test, not numbers to quote)"

{
cat <<EOF
# cowbell benchmark

Written by \`bash bench/run.sh$([ "$quick" = 1 ] && echo ' --quick')\` ($mode_words) on $(date -u '+%Y-%m-%d %H:%M UTC').

| machine | |
| --- | --- |
| CPU | $cpu_model |
| cores | $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) |
| kernel | $(uname -srm) |
| rustc | $(rustc --version 2>/dev/null || echo unknown) |
| load average (1, 5, 15 min) before / after | $load_before / $load_after |
| time | ${total_s} s in all: measurements ${measure_s} s, compiling the bench ${compile_s} s |

The daemon measured is \`bin/cowbell\` from \`sh build.sh\` (the first
table says what that is), driven by the ignored tests of \`tests/bench.rs\`
against the fake herdr server of \`tests/support/fake_herdr.rs\`. A cell
"a (b–c)" is the median a of several runs (or blocks of a run), with the
minimum b and maximum c. The machine may be shared and noisy: ratios
measured within one run are the numbers to trust. Goals marked MISSED:
${missed}.$([ -n "$failed" ] && printf '\n\n**Failures in this run:%s** (see the output of bench/run.sh).' "$failed")

## 1. Binary size

\`bin/cowbell\` as each command leaves it, and whether it is static. Goals:
at most 480 KiB (\`build.sh\`) and 128 KiB (\`build.sh --tiny\`). When the
tiny build's prerequisites (rustup, a nightly toolchain with rust-src) are
missing, \`build.sh --tiny\` falls back to the normal build and the note says
so.

$(table size)

## 2. Peak resident memory

VmHWM of the daemon from /proc after it put icons on every tab (every tab
needs one: blocked, working and done in turn) and then handled a status
change of every tenth tab; 3 panes per tab, all subscribed. VmRSS at the
same moment. Goal: under 2 MiB at 1000 tabs.

$(table memory)

## 3. Idle cost

100 tabs with icons, then no events. Wake-ups are the daemon's voluntary
context switches (/proc/<pid>/status); CPU is utime+stime in clock ticks
(/proc/<pid>/stat) and, more precisely, schedstat's run time. The heartbeat
(one \`plugin.list\` and one \`tab.list\`) is the only expected activity;
"events caused" counts renames (each would send herdr's subscribers an
event). Goal: at most 2 wake-ups per heartbeat period beyond the events
herdr delivers (none here), and 0 CPU ticks. The full run idles 60 s of
real time with the real 60 s heartbeat, which dominates the run's length;
\`--quick\` divides the daemon's durations by 40 (COWBELL_TIME_SCALE) and
idles 3 s.

$(table idle)

## 4. Latency: status change to rename

Time from a pane's status change in the fake server to the \`tab.rename\`
arriving at it (the server's own timestamps), 3 panes per tab. Changes come
at random gaps of 0 to 20 ms on random tabs; a tab changes again only after
its previous rename arrived. The debounce window opens at its first event
and does not slide, so a change that lands in an open window waits less
than 100 ms: p50 reflects that, p99 is the full debounce plus the rest.
"herdr 100ms" is herdr's delivery poll (a change waits up to 100 ms before
the daemon even hears of it); "at once" isolates cowbell's own share, goal:
p99 within 20 ms of the 100 ms debounce. The fake's own share is shown:
"fake event ms" is its delivery of a status change to a plain subscriber
(in the 100 ms rows, the poll), "fake tab list ms" its answer to a
\`tab.list\` from a plain client; every resync pays the latter once.
"daemon cpu ms per resync" is the daemon's CPU time over the run divided by
its resyncs (\`tab.list\` requests), events and echoes included.

$(table latency)

## 5. CPU per 1000 status changes

100 tabs, every change isolated so that it gets a resync of its own (the
daemon's durations divided by 20, so the debounce is 5 ms; the work of a
resync does not depend on it): the cost of 1000 resyncs, each one
\`tab.list\` of 100 tabs, one rename, the state saved and the log written.
The median, minimum and maximum are over 5 blocks of the run, each scaled to
1000 changes. The run also checks the requests: each change must bring
exactly one \`tab.list\` and one \`tab.rename\` of the changed tab, and
nothing else.

$(table cpu)

## 6. Side by side: a process per event vs the daemon

The same status changes (random tabs of 100) at the same pace, one every
10 ms. "cowbell sync per event" starts one \`cowbell sync\` process per
event, a full reconcile (one \`tab.list\`, the renames, state.json read and
written), as herdr-tab-status does; its CPU is the children's user+system
time (getrusage). The daemon gets the same events from herdr with its
100 ms delivery and debounces them. The Python floor is a bare
\`python3 -c 'import json,socket'\` per event, back to back: what any Python
plugin pays before doing anything (500 starts in the full run, their CPU per
event compared with the daemon's). Wall time: for the daemon, until its last
rename; for the process approach, until the last process exited. The
per-event CPU is the median of 5 blocks; the ratio divides each approach's
CPU per event by the daemon's. ${python_note}.

$(table side)

## 7. Startup

From running the startup hook (\`cowbell daemon --replace\`, the way herdr
runs it) to the last rename that makes every icon right, 100 tabs with 3
panes, every tab needing an icon, herdr's 100 ms delivery and its replay of
buffered events. "hook returns" is how long the hook command itself takes.
Goal: under 1 s. The watchdog (the \`pane.agent_detected\` hook) is timed the
same way, until herdr would see it finish: 10 runs a round with the daemon
running, and one after the daemon was killed, when it starts a new one.
Goal: well under 50 ms either way (the median of each under 50 ms).

$(table startup)
EOF
} > "$out"

say "wrote $out (${total_s} s; measurements ${measure_s} s)"
if [ -n "$failed" ]; then
    say "FAILED:$failed"
    exit 1
fi

#!/usr/bin/env bash
# dqgate vs DuckDB on the same generated daily partitions.
#
#   benches/run.sh [--data DIR] [--threads T] [--reps N] [--warmup N] [--record] [SIZE...]
#
# SIZE is a row count with an optional K/M suffix (default: 10M). For each size
# the data is generated once under DIR/SIZE (default DIR: /work/benchdata, or
# $DQGATE_BENCH_DATA), then every rule file in benches/families/ and
# benches/standard.dq is run by `dqgate check` and by DuckDB's equivalent SQL
# (benches/duckdb_equiv.py), alternating, N times each after the warm-up runs.
# Wall time and peak RSS come from /usr/bin/time; the table shows medians.
# Every run's metric values are compared with DuckDB's; a mismatch is printed
# loudly and makes the script exit 1. --record also writes the table to
# benches/results/YYYY-MM-DD.md (appended to).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
data=${DQGATE_BENCH_DATA:-/work/benchdata}
threads=$(nproc)
reps=3
warmup=1
record=0
files=8
sizes=()
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --record) record=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[ ${#sizes[@]} -gt 0 ] || sizes=(10M)

rows_of() {
  case $1 in
    *M) echo $(( ${1%M} * 1000000 )) ;;
    *K) echo $(( ${1%K} * 1000 )) ;;
    *) echo "$1" ;;
  esac
}

log() { echo "[bench] $*" >&2; }

setup_tools() {
  if [ ! -x /usr/bin/time ]; then
    log "installing GNU time"
    if [ "$(id -u)" = 0 ]; then apt-get install -y time >&2; else sudo apt-get install -y time >&2; fi
  fi
  mkdir -p "$data"
  if [ ! -x "$data/venv/bin/python" ]; then
    log "creating $data/venv"
    python3 -m venv "$data/venv"
  fi
  if ! "$data/venv/bin/python" -c 'import duckdb' 2>/dev/null; then
    log "pip install duckdb"
    "$data/venv/bin/pip" install --quiet duckdb >&2
  fi
  log "building dqgate (release)"
  (cd "$repo" && cargo build --release --bin dqgate >&2)
  dqgate=${CARGO_TARGET_DIR:-$repo/target}/release/dqgate
}

# Generates DIR/SIZE unless a previous run completed it (marker `_generated`,
# which dqgate and the DuckDB glob both ignore).
generate() {
  local size=$1 dir=$data/$1
  [ -f "$dir/_generated" ] && return
  log "generating $size rows into $dir"
  rm -rf "$dir"
  (cd "$repo" && cargo bench --bench gen_partition -- \
    --rows "$(rows_of "$size")" --files "$files" --out "$dir" >&2)
  touch "$dir/_generated"
}

# Runs one command under /usr/bin/time; appends "seconds kilobytes" to $2.
# Exit codes in $3 (space-separated) count as success.
timed() {
  local out=$1 stats=$2 ok=$3 rc=0
  shift 3
  /usr/bin/time -f '%e %M' -o "$stats.one" "$@" >"$out" 2>"$out.err" || rc=$?
  if [[ " $ok " != *" $rc "* ]]; then
    log "FAILED (exit $rc): $*"
    cat "$out.err" >&2
    exit 1
  fi
  cat "$stats.one" >>"$stats"
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

bench_family() {
  local size=$1 family=$2 rules=$3 dir=$data/$1 work=$tmp/$1-$2
  mkdir -p "$work"
  : >"$work/dq.stats"; : >"$work/duck.stats"
  local run_dq=(timed "$work/dq.json" "$work/dq.stats" "0 1" "$dqgate" check "$rules" --staged "$dir"
    --partition sales_date=2025-03-05 --format json --threads "$threads")
  local run_duck=(timed "$work/duck.json" "$work/duck.stats" "0" "$data/venv/bin/python"
    "$here/duckdb_equiv.py" run --data "$dir" --family "$family" --threads "$threads")
  local i
  for ((i = 0; i < warmup + reps; i++)); do
    # Alternate which engine goes first, so neither always finds a warmer cache.
    if ((i % 2 == 0)); then "${run_dq[@]}"; "${run_duck[@]}"; else "${run_duck[@]}"; "${run_dq[@]}"; fi
    if ((i < warmup)); then : >"$work/dq.stats"; : >"$work/duck.stats"; fi
    "$data/venv/bin/python" "$here/duckdb_equiv.py" compare --verdict "$work/dq.json" \
      --duckdb "$work/duck.json" --label "$size $family" || mismatches=$((mismatches + 1))
  done
  local dq_s dq_kb duck_s duck_kb
  dq_s=$(cut -d' ' -f1 "$work/dq.stats" | median)
  dq_kb=$(cut -d' ' -f2 "$work/dq.stats" | median)
  duck_s=$(cut -d' ' -f1 "$work/duck.stats" | median)
  duck_kb=$(cut -d' ' -f2 "$work/duck.stats" | median)
  awk -v s="$size" -v f="$family" -v a="$dq_s" -v b="$duck_s" -v m="$dq_kb" -v n="$duck_kb" \
    'BEGIN { printf "| %s | %s | %.2f | %.2f | %s | %.0f | %.0f |\n", s, f, a, b,
             (b > 0 ? sprintf("%.2f", a / b) : "n/a"), m / 1024, n / 1024 }'
}

machine() {
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc)"
  echo "- RAM: $(free -g | awk '/^Mem:/ {print $2}') GiB total (free -g)"
  echo "- dqgate $(git -C "$repo" rev-parse --short HEAD), DuckDB $("$data/venv/bin/python" -c 'import duckdb; print(duckdb.__version__)')"
  echo "- threads $threads, $reps timed runs (median) after $warmup warm-up, $files files per size, warm page cache"
}

setup_tools
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mismatches=0
table=$tmp/table.md
{
  echo "| size | family | dqgate s | duckdb s | ratio | dqgate RSS MB | duckdb RSS MB |"
  echo "|---|---|---:|---:|---:|---:|---:|"
} >"$table"
for size in "${sizes[@]}"; do
  generate "$size"
  for rules in "$here"/families/*.dq "$here/standard.dq"; do
    family=$(basename "$rules" .dq)
    log "$size $family"
    bench_family "$size" "$family" "$rules" >>"$table"
    tail -n 1 "$table" >&2
  done
done
report=$(machine; echo; cat "$table")
echo "$report"
if ((record)); then
  mkdir -p "$here/results"
  out=$here/results/$(date +%F).md
  # Several runs on one day (one per size, say) append to the day's file.
  [ -f "$out" ] || { echo "# $(date +%F): dqgate vs DuckDB"; echo; } >"$out"
  { echo "$report"; echo; } >>"$out"
  log "recorded $out"
fi
if ((mismatches)); then
  echo "!!!!!! $mismatches run(s) where dqgate's values differ from DuckDB's: see MISMATCH above !!!!!!" >&2
  exit 1
fi

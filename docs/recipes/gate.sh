#!/usr/bin/env bash
# Write-audit-publish of one daily partition with dqgate as the gate step.
#
#   gate.sh RULES STAGED_DIR DATE TABLE_ROOT [REPORT_DIR]
#
# Exit code: 0 the partition is published (or already was); 1 the gate failed
# and nothing was published; 2, 3, 4 as dqgate says (usage, unreadable data,
# publish conflict). Either way REPORT_DIR (default ./reports) keeps the
# verdict as JSON and a static HTML report. DQGATE names the binary.
set -euo pipefail

if [ $# -lt 4 ]; then
  echo "usage: $0 RULES STAGED_DIR DATE TABLE_ROOT [REPORT_DIR]" >&2
  exit 2
fi
rules=$1 staged=$2 date=$3 table=$4 reports=${5:-reports}
dqgate=${DQGATE:-dqgate}
mkdir -p "$reports"
verdict="$reports/verdict-$date.json"

# 1. Write: the job has written the partition's Parquet files to $staged.

# 2. Audit and publish. Under `set -e` a failing command stops the script,
#    so keep dqgate's exit code instead and decide below.
status=0
"$dqgate" publish "$rules" --staged "$staged" --partition "sales_date=$date" \
  --table "$table" --format json >"$verdict" || status=$?

# 3. Keep a report in every case (the verdict file holds an error record
#    when the data could not be audited).
"$dqgate" report "$verdict" --table "$table" -o "$reports/report-$date.html"

case $status in
  0) echo "published sales_date=$date into $table" ;;
  1) echo "gate failed: sales_date=$date was not published; see $reports/report-$date.html" >&2 ;;
  *) echo "dqgate could not audit or publish sales_date=$date (exit $status)" >&2 ;;
esac
exit "$status"

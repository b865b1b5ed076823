#!/usr/bin/env bash
# Validates dqgate's `--format junit` output against the JUnit XML schema
# (testdata/junit.xsd) with xmllint: failing, passing, warning and skipped
# checks, samples, names full of markup, an unreadable input, an invalid rule
# file, and a passed verdict whose publish is refused. A control document
# that breaks the schema must be rejected, or the validation proves nothing.
#
#   tests/junit/validate.sh DQGATE WORKDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
dqgate=$1 work=$2
schema=testdata/junit.xsd
mkdir -p "$work"

n=0
junit() { # expected-exit args...
  local want=$1; shift
  n=$((n + 1))
  local out="$work/junit-$n.xml" code=0
  "$dqgate" "$@" --format junit >"$out" 2>/dev/null || code=$?
  if [ "$code" != "$want" ]; then
    echo "junit: exit $code, expected $want: $*" >&2
    exit 1
  fi
  xmllint --noout --schema "$schema" "$out"
}

day=(--partition sales_date=2025-03-05)
junit 1 check rules/daily_sales.dq --staged testdata/data/sales_bad "${day[@]}"
junit 0 check rules/daily_sales.dq --staged testdata/data/sales_ok "${day[@]}"
junit 0 check rules/sensor_readings.dq --staged testdata/data/sensors_ok \
  --partition site=berlin --partition day=2025-03-05
junit 1 check testdata/cases/escape_markdown/rules.dq --staged testdata/data/sales_bad "${day[@]}"
junit 3 check rules/daily_sales.dq --staged testdata/data/truncated "${day[@]}"
junit 2 check testdata/cases/lint_syntax/rules.dq --staged testdata/data/sales_ok "${day[@]}"
# The staged copy keeps Spark's _temporary/ files: the verdict passes, the
# publish is refused (exit 2), and the refusal is an <error> testcase.
rm -rf "$work/staged" "$work/table"
cp -r testdata/data/sales_ok "$work/staged"
junit 2 publish rules/daily_sales.dq --staged "$work/staged" "${day[@]}" --table "$work/table"
grep -q '<testcase classname="daily_sales.sales_date=2025-03-05" name="publish"' "$work/junit-$n.xml"

sed 's/ name="[^"]*"//' "$work/junit-1.xml" >"$work/control.xml"
if xmllint --noout --schema "$schema" "$work/control.xml" 2>/dev/null; then
  echo "junit: the control document without names passed the schema" >&2
  exit 1
fi
echo "junit: $n documents valid against $schema"

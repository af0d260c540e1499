#!/usr/bin/env bash
# The main job, end to end, on a local embedded ledger: install what is missing, build,
# create a ledger, append a generated week of iPhone + Apple Watch activity, read it back,
# append it again (all duplicates), and verify the hash chain.
# The ledger is $LEDGER_DB, else ./demo.db (removed and recreated on each run).
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/deps.sh
# The Swift runtime and Foundation are linked into the binaries: each command then starts in
# about half the time (README "Performance"). `ledger` is static and runs `import` (and `serve`)
# in ledger-dynamic, which building `ledger` builds next to it.
swift build -c release --static-swift-stdlib --product ledger >&2
swift build -c release --static-swift-stdlib --product ledger-gen >&2
bin="$(swift build -c release --show-bin-path)"
export LEDGER_DB="${LEDGER_DB:-$PWD/demo.db}"
rm -rf "$LEDGER_DB"
events="$(mktemp)"
trap 'rm -f "$events"' EXIT

echo "\$ ledger init --timezone Europe/Paris"
"$bin/ledger" init --timezone Europe/Paris
"$bin/ledger-gen" --users 2 --days 7 --zone Europe/Paris --seed 42 > "$events"
echo "\$ ledger append events.ndjson   # $(wc -l < "$events") generated events"
"$bin/ledger" append "$events"
echo "\$ ledger append events.ndjson   # again: nothing new"
"$bin/ledger" append "$events"
echo "\$ ledger log --kind correction --format table"
"$bin/ledger" log --kind correction --format table
echo "\$ ledger log --limit 1"
"$bin/ledger" log --limit 1
echo "\$ ledger project daily-steps --user user-1 --format table   # iPhone and Watch merged"
"$bin/ledger" project daily-steps --user user-1 --format table
echo "\$ ledger project per-source --user user-1 --type steps --date 2026-01-02 --format table   # not merged"
"$bin/ledger" project per-source --user user-1 --type steps --date 2026-01-02 --format table
echo "\$ ledger project daily-steps --user user-2 --format chart"
"$bin/ledger" project daily-steps --user user-2 --format chart
echo "\$ ledger project daily-steps --user user-1 --date today --fallback   # no data today: stale last-known"
"$bin/ledger" project daily-steps --user user-1 --date today --fallback
echo "\$ ledger replay --to-seq 800 --projection last-known"
"$bin/ledger" replay --to-seq 800 --projection last-known
echo "\$ ledger verify"
"$bin/ledger" verify
export_file="../shared/data/rgosdin__docs/apple_health_export/export.xml"
if [ -f "$export_file" ]; then
  echo "\$ ledger import apple-health $export_file --user ryan   # a real iPhone export"
  "$bin/ledger" import apple-health "$export_file" --user ryan
  echo "\$ ledger project daily-steps --user ryan --from 2019-05-20 --to 2019-05-26 --format chart"
  "$bin/ledger" project daily-steps --user ryan --from 2019-05-20 --to 2019-05-26 --format chart
else
  echo "(../shared/data is absent: skipping the import of a real Apple Health export)"
fi
echo "\$ ledger stats --format table"
"$bin/ledger" stats --format table

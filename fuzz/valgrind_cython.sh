#!/usr/bin/env bash
# Memory safety of kproto's Cython extensions: drive the compiled code over the fuzz corpora under valgrind
# memcheck and fail on any error in it.
#
#   fuzz/valgrind_cython.sh [corpus dirs ...]   # default: fuzz/corpus/{request_frames,response_frames,message_sets}
#
# Directories are named after the harness whose input layout they hold (a campaign's scratch corpus, e.g.
# run_all.py --work-dir W, gives W/message_sets).  PYTHONMALLOC=malloc sends every Python allocation through
# malloc so memcheck sees object boundaries; fuzz/valgrind-python.supp silences CPython's own known reports.
# Leaks are not counted (an interpreter that exits does not free everything); invalid reads/writes, uses of
# uninitialised values and bad frees are, anywhere in the process, and the exit status is 99 when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
command -v valgrind >/dev/null || { echo "valgrind_cython.sh: valgrind is not installed" >&2; exit 2; }
log=$(mktemp -t kproto-valgrind.XXXXXX)
set +e
PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 --errors-for-leak-kinds=none --leak-check=no \
  --track-origins=yes --num-callers=30 --suppressions=fuzz/valgrind-python.supp --log-file="$log" \
  "$PY" fuzz/cython_paths.py "$@"
status=$?
set -e
grep -E "ERROR SUMMARY|Invalid|uninitialised|cython_paths" "$log" | sort | uniq -c | sort -rn | head -20
if [ "$status" -eq 99 ]; then
  echo "valgrind_cython.sh: memcheck reported errors; full log: $log" >&2
  exit 99
elif [ "$status" -ne 0 ]; then
  tail -20 "$log" >&2
  echo "valgrind_cython.sh: the driver failed (exit $status) before memcheck could finish; log: $log" >&2
  exit "$status"
fi
echo "valgrind_cython.sh: no memcheck errors (log: $log)"

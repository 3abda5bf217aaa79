#!/bin/bash
# A `TURNSTONE_TEST_BIN` wrapper for A/B runs of the serve bench (docs/server.md,
# Benchmarks). It runs $BIN (default: target/release/turnstone) with the
# bench's arguments, and:
#   COMP=<dir>   replaces the --builtin-dir the bench passes (another build of
#                the components; precompile them first: `<binary> plugins
#                precompile` with the components beside the binary);
#   KEEP=1       writes `release_code_pages = false` under [server] in the
#                test server's --config file;
#   EVICT=1      drops $BIN and the components directory from the page cache
#                before starting (GNU dd's nocache), so both sides of an A/B
#                start from the same cache state: a freshly written copy of
#                the same binary mapped 14.9 MB of its code at idle against
#                10.5 MB for an older copy (large page-cache folios), which
#                swamps the differences these runs look for;
#   ORPHAN=1     starts the server detached, so it outlives the bench (to watch
#                it after the bench's client exits), and writes its pid to
#                ${ORPHAN_PID:-/tmp/turnstone-orphan.pid}. Kill it afterwards.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${BIN:-$here/../../../target/release/turnstone}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --builtin-dir)
      args+=("$1" "${COMP:-$2}"); shift 2;;
    --config)
      if [ "${KEEP:-0}" = 1 ]; then
        if grep -q '^\[server\]$' "$2"; then
          sed -i 's/^\[server\]$/[server]\nrelease_code_pages = false/' "$2"
        else
          printf '\n[server]\nrelease_code_pages = false\n' >> "$2"
        fi
      fi
      args+=("$1" "$2"); shift 2;;
    *)
      args+=("$1"); shift;;
  esac
done
if [ "${EVICT:-0}" = 1 ]; then
  comp="${COMP:-$(dirname "$bin")/../components}"
  find "$bin" "$comp" -type f 2>/dev/null | while read -r f; do
    dd if="$f" iflag=nocache count=0 status=none
  done
fi
if [ "${ORPHAN:-0}" = 1 ]; then
  setsid "$bin" "${args[@]}" </dev/null &
  echo $! > "${ORPHAN_PID:-/tmp/turnstone-orphan.pid}"
  wait $!
else
  exec "$bin" "${args[@]}"
fi

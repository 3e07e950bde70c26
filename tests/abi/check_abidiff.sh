#!/bin/sh
# The built library against the abidw baseline: no removed or changed
# function, type or layout (added symbols are fine). Exit 77 = skip when
# abigail-tools is not installed. Regenerating the baseline: abi/README.md.
baseline=$1
library=$2
if ! command -v abidiff >/dev/null 2>&1; then
  echo "abidiff not found (apt-get install abigail-tools): skipped"
  exit 77
fi
abidiff --no-added-syms "$baseline" "$library"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "abidiff exit status $rc: the ABI changed against $baseline (see abi/README.md)"
fi
exit "$rc"

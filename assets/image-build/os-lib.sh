#!/bin/bash
# Sourced by every image build step: which base OS this is (from /etc/os-release) and its row of the per-OS table,
# os-table.env, generated from cluster_config/os_support.py (the table the validator reads too).
#
#   . "$(dirname "$0")/os-lib.sh"; os_value packages
#
# os_value KEY prints the value of KEY for this base OS and fails on a key the table lacks; steps assign it, one
# assignment a line (`value=$(os_value KEY)`: then `set -e` stops the build on that failure).
# tests/contracts/test_image_os_contract.py checks that every key a step asks for is in every OS's row.
. "${ES_OS_RELEASE_FILE:-/etc/os-release}"  # a path only, for tests of this file (tests/unit/test_os_support.py)
. "$(dirname "${BASH_SOURCE[0]}")/os-table.env"
os_release="${ID}${VERSION_ID%%.*}"
base_os_var="base_os_${os_release}"
base_os="${!base_os_var-}"
if [ -z "$base_os" ]; then
  echo "$(basename "$0"): unsupported base OS ${PRETTY_NAME:-$os_release} (see cluster_config/os_support.py)" >&2
  exit 1
fi
os_value() {
  local name="${base_os}_$1"
  [ -n "${!name+set}" ] || { echo "$(basename "$0"): os-table.env has no $1 for $base_os" >&2; exit 1; }
  printf '%s\n' "${!name}"
}

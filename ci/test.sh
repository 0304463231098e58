#!/usr/bin/env bash
# The whole test suite: unit, integration, property and snapshot tests of
# every crate, then the loom model checks of the lock-free code.
set -euxo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked
if [ -x ci/loom.sh ]; then
    ci/loom.sh
fi

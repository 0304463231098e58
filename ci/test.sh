#!/usr/bin/env bash
# The whole test suite: unit, integration, property and snapshot tests of
# every crate (the real-wire ones build their own network namespaces, as
# root), then the loom model checks of the lock-free code.
set -euxo pipefail
cd "$(dirname "$0")/.."
ci/deps.sh
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked
if [ -x ci/loom.sh ]; then
    ci/loom.sh
fi

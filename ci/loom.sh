#!/usr/bin/env bash
# Model-check the lock-free code of pktsched-runtime and the AF_XDP ring
# protocol of pktsched-io with loom.
#
# Builds with `--cfg loom` (which swaps the crate's `sync` facade to loom's
# atomics and cells) into its own target directory, so the normal build cache
# is not invalidated. The preemption bound keeps the run to a few minutes on
# two cores; raise LOOM_MAX_PREEMPTIONS locally for a deeper search.
set -euxo pipefail

cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-5}"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/loom}"

# The mailbox models whose item count visits a line a third time set their
# own bound (2 preemptions) so that the run stays within CI's budget.
# The model tests compile only under `--cfg loom`, so the workspace's
# clippy run never sees them: lint them here.
cargo clippy --release -p pktsched-runtime --test loom_mailbox --test loom_doorbell --test loom_handoff --test loom_sleep --test loom_stop \
    -p pktsched-io --test loom_xdp_ring -- -D warnings
cargo test --release -p pktsched-runtime --test loom_mailbox --test loom_doorbell --test loom_handoff --test loom_sleep --test loom_stop -- --test-threads=2 "$@"
cargo test --release -p pktsched-io --test loom_xdp_ring -- --test-threads=2 "$@"

#!/usr/bin/env bash
# Miri over the runtime crate (the one with unsafe code): the mailbox's own
# tests and the library's unit tests. Not part of ci/test.sh: it needs a
# nightly toolchain with the `miri` component (installed here if missing)
# and takes several minutes. Two unit tests are skipped because they run
# millions of iterations (hours under Miri) and contain no unsafe code of
# their own: the 40 Gbit/s link exactness run and the overload share test.
set -euxo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
cargo +nightly miri test -p pktsched-runtime --test mailbox
cargo +nightly miri test -p pktsched-runtime --lib -- \
    --skip greedy_40gbit_is_exact_over_a_long_run \
    --skip shares_follow_weights_under_overload

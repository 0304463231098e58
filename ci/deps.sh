#!/usr/bin/env bash
# What the tests need besides cargo: iproute2 (`ip netns`, veth pairs) and
# ethtool (offloads off on test veths). Installed here, as root, only if
# missing; tests that need them skip with a message when not root.
set -euxo pipefail
if [ "$(id -u)" != 0 ]; then
    exit 0
fi
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v ethtool >/dev/null || missing+=(ethtool)
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

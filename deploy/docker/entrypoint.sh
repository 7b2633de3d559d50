#!/bin/sh
# Entrypoint of the cuzk image: make sure the state directories exist and are writable by the
# user the engine runs as, then exec `cuzk` with the container's arguments (default: serve).
#
# A volume mounted over a path the image did not create comes up owned by root; the engine would
# then fail on its first proving key (PermissionError on the key's lock file). Failing here says
# which directory and what to do instead.
set -eu

keys_dir="${CUZK_ENGINE_KEYS_DIR:-${HOME:-/var/lib/cuzk}/keys}"
state_dir="${XDG_STATE_HOME:-${HOME:-/var/lib/cuzk}/.local/state}"

for dir in "$keys_dir" "$state_dir"; do
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
        owner="$(stat -c '%u:%g' "$dir" 2>/dev/null || echo unknown)"
        echo "cuzk: $dir is not writable by uid $(id -u) (it is owned by $owner)." >&2
        echo "cuzk: mount a named volume there (the image creates it owned by cuzk), or" \
             "chown it to $(id -u):$(id -g) on the host." >&2
        exit 73  # EX_CANTCREAT
    fi
done

exec cuzk "$@"

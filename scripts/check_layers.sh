#!/usr/bin/env bash
# check_layers.sh: keeps the C library layered as src -> kernels -> dict -> store, each
# folder of core/ using only its own and the folders below it (docs/architecture.md):
#   core/src      tensors, storage, views, shapes, errors: calls nothing above it
#   core/kernels  the loops over elements: may call src
#   core/dict     the TensorDict container and its process transport: may call both
#   core/store    files: memmap folders, consolidated files, CSV, durable writes
# It reads the objects the library was linked from (nm), so a call upward fails here even
# when it links, and the source for #include lines that reach upward (a header can carry
# an upward dependency without any symbol). Usage: check_layers.sh BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."

obj="${1:-build}/obj/core"
fail=0

# The objects of a folder's sources (not stale ones of sources since moved or deleted).
objects() { for c in core/"$1"/*.c; do c=${c##*/}; echo "$obj/$1/${c%.c}.o"; done; }
# Symbols the objects of a folder define, and those they use without defining.
defined() { objects "$1" | xargs nm --defined-only | awk 'NF == 3 && $2 ~ /^[A-Z]$/ { print $3 }' | sort -u; }
undefined() { objects "$1" | xargs nm --undefined-only | awk 'NF == 2 { print $2 }' | sort -u; }

# Fails when a folder of objects uses a symbol defined by the folder above it.
check_calls() {
  local lower=$1 upper=$2 bad
  bad=$(comm -12 <(undefined "$lower") <(defined "$upper"))
  [ -z "$bad" ] && return 0
  echo "check_layers: core/$lower calls into core/$upper (a lower layer must not):" >&2
  for sym in $bad; do
    local users
    users=$(objects "$lower" | xargs nm -A --undefined-only | awk -v s="$sym" '$NF == s' |
            cut -d: -f1 | sed 's|.*/||; s|\.o$|.c|' | sort -u | tr '\n' ' ')
    echo "  $sym  (used by $users)" >&2
  done
  fail=1
}

# Fails when a source file of a folder includes a header of a folder above it.
check_includes() {
  local lower=$1 upper=$2 bad
  bad=$(grep -n "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"\.\./$upper/" \
          core/"$lower"/*.c core/"$lower"/*.h 2>/dev/null || true)
  [ -z "$bad" ] && return 0
  echo "check_layers: core/$lower includes a header of core/$upper:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  fail=1
}

layers=(src kernels dict store)

for layer in "${layers[@]}"; do
  for o in $(objects "$layer"); do
    if [ ! -f "$o" ]; then
      echo "check_layers: $o is missing; build the library first (make lib)" >&2
      exit 2
    fi
  done
done

# Every pair (lower, upper) of the order above.
for ((i = 0; i < ${#layers[@]}; i++)); do
  for ((j = i + 1; j < ${#layers[@]}; j++)); do
    check_calls "${layers[i]}" "${layers[j]}"
    check_includes "${layers[i]}" "${layers[j]}"
  done
done

if [ "$fail" = 0 ]; then echo "check_layers: core/src -> core/kernels -> core/dict -> core/store holds"; fi
exit "$fail"

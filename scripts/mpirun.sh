#!/usr/bin/env bash
# mpirun.sh: OpenMPI's mpirun with the settings this project needs, in one place.
#   scripts/mpirun.sh -n 2 luajit script.lua     (any mpirun arguments follow)
# --oversubscribe   more ranks than cores (tests run 3 ranks on a 2-core machine)
# --enable-recovery a rank that dies does not take the job down: the others see their
#                   calls fail (timeouts), as tensordict.dist promises, and end cleanly
# --bind-to none    Map workers forked inside a rank may use every core
# --allow-run-as-root  when run as root (containers, CI)
# Extra flags come from TD_MPIRUN_FLAGS (e.g. "--mca btl_vader_single_copy_mechanism none"
# where the kernel refuses cross-memory attach). Exits 127 when mpirun is absent.
set -euo pipefail
if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpirun.sh: mpirun not found (install openmpi-bin: scripts/deps.sh)" >&2
  exit 127
fi
flags=(--oversubscribe --enable-recovery --bind-to none)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
# shellcheck disable=SC2206
[[ -n "${TD_MPIRUN_FLAGS:-}" ]] && flags+=(${TD_MPIRUN_FLAGS})
exec mpirun "${flags[@]}" "$@"

#!/usr/bin/env bash
# mpirun.sh: OpenMPI's mpirun with the settings this project needs, in one place.
#   scripts/mpirun.sh -n 2 luajit script.lua     (any mpirun arguments follow)
# --oversubscribe   more ranks than cores (tests run 3 ranks on a 2-core machine)
# --bind-to none    Map workers forked inside a rank may use every core
# --enable-recovery only with TD_MPI_RECOVERY=1: a rank that dies does not take the job
#                   down, so the others see their calls fail (timeouts) and end cleanly
#                   (tests/mpi checks that). OpenMPI 4's mpirun then exits 0 whatever
#                   the ranks did; without it, a dead rank makes mpirun kill the others
#                   and exit non-zero.
# --mca pml ob1 --mca btl self,vader
#                   shared memory between ranks of one machine, what this script is for
#                   (TD_MPI_ONE_NODE=0 leaves MPI's choice): OpenMPI 4 otherwise tries UCX
#                   first, whose probing adds ~0.2 s to every rank's MPI_Init (0.29 vs
#                   0.08-0.11 s here) for no gain on one node (tests/bench/bench_dist.lua);
#                   and HWLOC_COMPONENTS=-pci,-linuxio unless set (below)
# --allow-run-as-root  when run as root (containers, CI)
# Extra flags come from TD_MPIRUN_FLAGS (e.g. "--mca btl_vader_single_copy_mechanism none"
# where the kernel refuses cross-memory attach). Exits 127 when mpirun is absent.
set -euo pipefail
if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpirun.sh: mpirun not found (install openmpi-bin: scripts/deps.sh)" >&2
  exit 127
fi
flags=(--oversubscribe --bind-to none)
if [[ "${TD_MPI_ONE_NODE:-1}" == 1 ]]; then
  flags+=(--mca pml ob1 --mca btl self,vader)
  # No I/O devices in hwloc's topology (the ranks inherit it): reading every PCI
  # device's config space was 40% of MPI_Init, and one node's shared memory needs no
  # NIC. 0.22 -> 0.13 s per mpirun -n 2 of an empty program.
  export HWLOC_COMPONENTS="${HWLOC_COMPONENTS:--pci,-linuxio}"
fi
[[ "${TD_MPI_RECOVERY:-0}" == 1 ]] && flags+=(--enable-recovery)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
# shellcheck disable=SC2206
[[ -n "${TD_MPIRUN_FLAGS:-}" ]] && flags+=(${TD_MPIRUN_FLAGS})
exec mpirun "${flags[@]}" "$@"

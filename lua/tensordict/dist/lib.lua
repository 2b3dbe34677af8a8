-- dist/lib.lua: finds and opens libtensordict_mpi for tensordict.dist, on first use
-- (sidelib.lua: $TENSORDICT_MPI_LIB, then beside libtensordict). Never raises: open()
-- returns nil and the reason when the library or MPI cannot be loaded.
return require("tensordict.sidelib")({
  name = "libtensordict_mpi", env = "TENSORDICT_MPI_LIB", cdefs = "tensordict.cdefs_mpi",
  abi = "td_mpi_abi_version",
  global = true, -- OpenMPI's plugins, loaded later with dlopen, look up libmpi's symbols
  missing = "build it with 'make' where OpenMPI's mpicc is installed",
})

"""Starting a learner: rendezvous under srun, mpiexec and torchrun, the learner entry point,
mpiexec's supervisor and the failure policy."""

"""Launcher detection (torchrun, MPI, Slurm), and each learner's device."""

from __future__ import annotations

import time

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.launch.rendezvous import (
    CUDA_BACKEND,
    choose_backend,
    detect_env,
    first_slurm_host,
    init_from_env,
    join_world,
    select_device,
    slurm_tasks_on_node,
)


def test_no_launcher_is_none():
    assert detect_env({"PATH": "/bin"}) is None


def test_torchrun_environment():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "n1",
           "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x"}
    d = detect_env(env)
    assert (d.rank, d.world_size, d.local_rank, d.master_addr, d.master_port, d.launcher) == (
        3, 4, 1, "n1", 29500, "torchrun")


def test_incomplete_torchrun_environment_names_the_variable():
    with pytest.raises(AsrdistError, match="MASTER_PORT"):
        detect_env({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h"})


def test_mpich_and_openmpi_environments():
    d = detect_env({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"})
    assert (d.rank, d.world_size, d.local_rank, d.master_addr, d.launcher) == (1, 2, 1, None,
                                                                              "mpi")
    d = detect_env({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
                    "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
    assert (d.rank, d.world_size, d.local_rank) == (5, 8, 1)


def test_mpi_wins_over_slurm_under_mpiexec_in_an_allocation():
    env = {"PMI_RANK": "3", "PMI_SIZE": "4", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0",
           "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "a[1-2]",
           "SLURM_JOB_ID": "7"}
    assert detect_env(env).launcher == "mpi"


def test_slurm_environment_as_srun_sets_it():
    env = {"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8",
           "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
           "SLURMD_NODENAME": "gpu013", "SLURM_STEP_NODELIST": "gpu[012-015]",
           "SLURM_JOB_ID": "123456"}
    d = detect_env(env)
    assert (d.rank, d.world_size, d.local_rank, d.node, d.master_addr, d.launcher) == (
        5, 8, 1, "gpu013", "gpu012", "slurm")
    assert d.master_port == 20000 + 123456 % 20000


def test_slurm_batch_shell_is_not_a_learner():
    assert detect_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "1"}) is None


def test_incomplete_slurm_environment_is_a_clear_error():
    with pytest.raises(AsrdistError, match="SLURM_LOCALID"):
        detect_env({"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2",
                    "SLURM_STEP_NODELIST": "a1", "SLURM_JOB_ID": "1"})


@pytest.mark.parametrize("nodelist,first", [("gpu[012-015,020]", "gpu012"), ("n1,n2", "n1"),
                                            ("node7", "node7"), ("a[3,5]", "a3")])
def test_first_slurm_host(nodelist, first):
    assert first_slurm_host(nodelist) == first


def test_init_without_launcher_fails_fast():
    t0 = time.monotonic()
    with pytest.raises(AsrdistError, match="no launcher"):
        init_from_env(env={})
    assert time.monotonic() - t0 < 1.0


def test_unknown_backend_is_named_before_any_rendezvous():
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1", "ASRDIST_BACKEND": "mpi"}
    with pytest.raises(AsrdistError, match="ASRDIST_BACKEND='mpi': use one of gloo, nccl"):
        init_from_env(env=env)



class _FakeCuda:
    """torch.cuda on a machine with ``count`` GPUs, recording set_device."""

    def __init__(self, monkeypatch, count: int) -> None:
        self.current: list[int] = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_device", self.current.append)


@pytest.mark.parametrize(("local_rank", "index"), [(0, 0), (1, 1), (5, 1)])
def test_cuda_is_the_gpu_of_the_local_rank_round_robin(monkeypatch, local_rank, index):
    cuda = _FakeCuda(monkeypatch, 2)
    assert select_device("cuda", local_rank) == f"cuda:{index}"
    assert cuda.current == [index]


@pytest.mark.parametrize("requested", ["cpu", "cuda:1"])
def test_cpu_or_a_named_gpu_is_taken_as_given(monkeypatch, requested):
    cuda = _FakeCuda(monkeypatch, 2)
    assert select_device(requested, 3) == requested
    assert cuda.current == []


def test_cuda_without_a_gpu_stays_cuda_for_the_trainer_to_refuse(monkeypatch):
    cuda = _FakeCuda(monkeypatch, 0)
    assert select_device("cuda", 1) == "cuda"
    assert cuda.current == []


def test_one_learner_joins_no_world(monkeypatch):
    for var in ("RANK", "TORCHELASTIC_RUN_ID", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    learner, device = join_world("cpu", 5.0)
    assert (learner.rank, learner.world_size, device) == (0, 1, "cpu")
    assert not torch.distributed.is_initialized()


# (device, GPUs on the host, learners on the node, ASRDIST_BACKEND) -> backend
BACKEND_CASES = [
    ("cpu", 0, 2, None, "gloo"),
    ("cpu", 8, 2, None, "gloo"),  # CPU learners on a GPU host: never NCCL
    ("cpu", 8, None, "gloo", "gloo"),
    ("cuda", 8, 8, None, CUDA_BACKEND),
    ("cuda", 8, None, None, CUDA_BACKEND),  # not said: one learner per GPU
    ("cuda", 1, 2, None, "gloo"),  # two learners, one GPU: NCCL refuses, gloo
    ("cuda", 2, 4, None, "gloo"),
    ("cuda:0", 8, 2, None, "gloo"),  # every learner of the node on GPU 0
    ("cuda:1", 8, 1, None, CUDA_BACKEND),
    ("cuda", 8, 8, "gloo", "gloo"),
    ("cuda", 8, 8, "nccl", CUDA_BACKEND),
]


@pytest.mark.parametrize(("device", "gpus", "local", "forced", "backend"), BACKEND_CASES)
def test_the_backend_follows_the_device(monkeypatch, device, gpus, local, forced, backend):
    _FakeCuda(monkeypatch, gpus)
    assert choose_backend(device, local, forced) == backend


def test_a_cpu_learner_never_asks_cuda(monkeypatch):
    def touched() -> None:
        raise AssertionError("CUDA asked about for a CPU learner")

    monkeypatch.setattr(torch.cuda, "is_available", touched)
    monkeypatch.setattr(torch.cuda, "device_count", touched)
    assert choose_backend("cpu", 4) == "gloo"


@pytest.mark.parametrize(("device", "gpus", "local", "forced", "why"), [
    ("cpu", 8, 2, "nccl", "NCCL cannot reduce CPU tensors"),
    ("cuda", 1, 2, "nccl", "2 learners on this node share 1 GPU"),
    ("cuda", 0, 2, None, "--device cuda: no CUDA device"),
    ("cuda", 2, 2, "mpi", "ASRDIST_BACKEND='mpi'"),
])
def test_impossible_backends_are_refused_by_name(monkeypatch, device, gpus, local, forced, why):
    _FakeCuda(monkeypatch, gpus)
    with pytest.raises(AsrdistError, match=why):
        choose_backend(device, local, forced)


@pytest.mark.parametrize(("spec", "node", "count"), [
    ("4", "0", 4), ("2(x3),1", "2", 2), ("2(x3),1", "3", 1), ("2(x3)", "5", None),
    ("weird", "0", None),
])
def test_slurm_tasks_on_this_node(spec, node, count):
    assert slurm_tasks_on_node({"SLURM_STEP_TASKS_PER_NODE": spec, "SLURM_NODEID": node}) == count


@pytest.mark.parametrize(("env", "size"), [
    ({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h",
      "MASTER_PORT": "1"}, 2),
    ({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "4"}, 4),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}, 1),
    ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
      "SLURM_STEP_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": "7", "SLURM_NODEID": "1",
      "SLURM_STEP_TASKS_PER_NODE": "3,1"}, 1),
])
def test_each_launcher_says_how_many_learners_share_the_node(env, size):
    assert detect_env(env).local_size == size

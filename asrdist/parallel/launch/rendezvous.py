"""One launch path for ``torchrun``, ``mpiexec -n N`` and ``srun``.

The launcher's environment says who this process is (rank, world size, local rank, node);
rendezvous then goes through torch.distributed's TCP store. The store's address comes from
``MASTER_ADDR``/``MASTER_PORT`` when set (torchrun always sets them), else from the first host
of ``SLURM_STEP_NODELIST`` (srun), else rank 0 broadcasts it over MPI (mpiexec). The backend
follows the learners' device (:func:`choose_backend`): gloo for CPU learners, whatever the host
has; for CUDA learners one default group that sends CUDA tensors over NCCL and CPU tensors
(the control collectives: stop flags, headers, object gathers) over gloo; gloo alone where the
learners of a node outnumber its GPUs (NCCL refuses two ranks on one GPU) or where
``ASRDIST_BACKEND=gloo`` says so (a cluster whose NCCL is broken). A missing variable is
reported at once, by name, rather than as a rendezvous that waits until its timeout. Each
learner takes the GPU of its local rank (:func:`select_device`). The store lives in learner 0's
process, except in elastic runs, where learner 0 forks a process of its own for it
(:mod:`asrdist.parallel.processes.storehost`); either way it listens on the named address alone
(:mod:`asrdist.parallel.processes.bind`), and the learners share a run secret
(:mod:`asrdist.parallel.processes.secret`) that nothing in the store reveals (docs/threat_model.md).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from asrdist.errors import AsrdistError, first_line
from asrdist.parallel.processes import secret, storehost
from asrdist.parallel.processes.bind import bind_address, listening_socket, pin_collectives
from asrdist.parallel.processes.signed import SignedStore
from asrdist.parallel.strategy import Learner

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0
BACKEND_ENV = "ASRDIST_BACKEND"
BACKENDS = ("gloo", "nccl")
CUDA_BACKEND = "cpu:gloo,cuda:nccl"  # CPU tensors over gloo, CUDA tensors over NCCL
# torchrun's agent hosts the store itself (torch's own, on every interface) and says so here:
# then every learner, learner 0 included, is its client
AGENT_STORE_ENV = "TORCHELASTIC_USE_AGENT_STORE"
SECRET_CHECK = "asrdist/secret/"  # learner 0's signed word, which the others check
SECRET_CHECK_S = 5.0


@dataclass(frozen=True)
class DistEnv:
    """Who this learner is, as the launcher said it."""

    rank: int
    world_size: int
    local_rank: int
    node: str  # hostname, or the launcher's node id; learners with equal ``node`` share a node
    master_addr: str | None  # None: to be broadcast over MPI by rank 0
    master_port: int | None
    launcher: str  # "torchrun", "mpi" or "slurm"
    local_size: int | None = None  # learners on this node, when the launcher says


def _int(env: Mapping[str, str], name: str, launcher: str) -> int:
    value = env.get(name)
    if value is None:
        raise AsrdistError(f"{launcher} environment is incomplete: {name} is not set")
    try:
        return int(value)
    except ValueError:
        raise AsrdistError(f"{launcher} environment: {name}={value!r} is not an integer") from None


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name, "")
    return int(value) if value.isdigit() else None


def slurm_tasks_on_node(env: Mapping[str, str]) -> int | None:
    """This node's task count from ``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``: 2 on each of
    the first three nodes, 1 on the fourth) and ``SLURM_NODEID``; None when not said."""
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    node = _optional_int(env, "SLURM_NODEID")
    if not spec or node is None:
        return None
    counts: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m is None:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts[node] if node < len(counts) else None


def first_slurm_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist such as ``gpu[012-015,020],login1`` (-> ``gpu012``)."""
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not m or not m.group(1):
        raise AsrdistError(f"cannot parse SLURM_NODELIST={nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def _slurm_port(env: Mapping[str, str]) -> int:
    """A port every task of a Slurm job derives alike, so no message is needed to agree on it."""
    if "MASTER_PORT" in env:
        return _int(env, "MASTER_PORT", "slurm")
    return 20000 + _int(env, "SLURM_JOB_ID", "slurm") % 20000


def detect_env(env: Mapping[str, str] | None = None) -> DistEnv | None:
    """Read the launcher's variables; None when no launcher started this process.

    Order matters: torchrun may run under srun (its RANK wins), and mpiexec under Slurm sets
    both PMI_* and SLURM_* (the MPI rank wins over the Slurm task id). Slurm counts only inside
    a job step (srun sets SLURM_STEP_ID): a batch script's own shell is not a learner.
    """
    env = os.environ if env is None else env
    host = socket.gethostname()
    if "RANK" in env or "TORCHELASTIC_RUN_ID" in env:
        name = "torchrun"
        missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in env]
        if missing:
            raise AsrdistError(f"{name} environment is incomplete: {', '.join(missing)} not set")
        return DistEnv(
            rank=_int(env, "RANK", name),
            world_size=_int(env, "WORLD_SIZE", name),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            node=host,
            master_addr=env["MASTER_ADDR"],
            master_port=_int(env, "MASTER_PORT", name),
            launcher=name,
            local_size=_optional_int(env, "LOCAL_WORLD_SIZE"),
        )
    for rank_var, size_var, local_var, local_size_var in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE"),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ):
        if rank_var in env:
            port = env.get("MASTER_PORT")
            return DistEnv(
                rank=_int(env, rank_var, "mpi"),
                world_size=_int(env, size_var, "mpi"),
                local_rank=int(env.get(local_var, "0")),
                node=host,
                master_addr=env.get("MASTER_ADDR"),
                master_port=int(port) if port else None,
                launcher="mpi",
                local_size=_optional_int(env, local_size_var),
            )
    if "SLURM_PROCID" in env and ("SLURM_STEP_ID" in env or "SLURM_STEPID" in env):
        name = "slurm"
        size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get(
            "SLURM_NODELIST"
        )
        addr = env.get("MASTER_ADDR")
        if addr is None:
            if not nodelist:
                raise AsrdistError(
                    "slurm environment is incomplete: neither MASTER_ADDR nor SLURM_STEP_NODELIST"
                    " / SLURM_JOB_NODELIST is set"
                )
            addr = first_slurm_host(nodelist)
        return DistEnv(
            rank=_int(env, "SLURM_PROCID", name),
            world_size=_int(env, size_var, name),
            local_rank=_int(env, "SLURM_LOCALID", name),
            node=env.get("SLURMD_NODENAME", env.get("SLURM_NODEID", host)),
            master_addr=addr,
            master_port=_slurm_port(env),
            launcher=name,
            local_size=slurm_tasks_on_node(env),
        )
    return None


def free_port() -> int:
    """A TCP port free on this host now (for a rendezvous store)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _mpi_rendezvous(denv: DistEnv) -> DistEnv:
    """Rank 0 picks the store's address and a free port and broadcasts them over MPI."""
    from mpi4py import MPI  # imported only here: it initialises MPI

    comm = MPI.COMM_WORLD
    hosts = comm.allgather(denv.node)
    if comm.Get_rank() == 0:
        addr = denv.master_addr
        if addr is None:
            addr = "127.0.0.1" if len(set(hosts)) == 1 else socket.gethostbyname(denv.node)
        port = denv.master_port or free_port()
        chosen = (addr, port)
    else:
        chosen = None
    addr, port = comm.bcast(chosen, root=0)
    return DistEnv(denv.rank, denv.world_size, denv.local_rank, denv.node, addr, port, "mpi",
                   denv.local_size)


def init_from_env(
    device: str = "cpu",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    elastic: bool = False,
    bind: str = "",
    run_dir: str | None = None,
) -> DistEnv:
    """Detect the launcher, rendezvous, and initialise torch.distributed's default group with
    the backend of learners on ``device`` (:func:`choose_backend`).

    ``timeout_s`` bounds the rendezvous and is the default group's timeout (every collective).
    ``elastic``: the store is served by a process of its own; ``bind``, ``run_dir``: where it
    listens and where the run's secret is (:func:`rendezvous`).
    Raises AsrdistError, naming the variable, when no launcher or an incomplete one is found.
    """
    env = os.environ if env is None else env
    denv = detect_env(env)
    if denv is None:
        raise AsrdistError(
            "no launcher environment found: run under torchrun, mpiexec or srun "
            "(RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, PMI_RANK/PMI_SIZE or SLURM_PROCID/"
            "SLURM_NTASKS)"
        )
    if not 0 <= denv.rank < denv.world_size:
        raise AsrdistError(
            f"{denv.launcher}: rank {denv.rank} outside world size {denv.world_size}"
        )
    backend = choose_backend(device, denv.local_size, env.get(BACKEND_ENV))
    if denv.master_addr is None or denv.master_port is None:
        denv = _mpi_rendezvous(denv)
    log.info(
        "learner %d/%d (local %d, node %s, pid %d) via %s: rendezvous at %s:%d, backend %s%s",
        denv.rank, denv.world_size, denv.local_rank, denv.node, os.getpid(), denv.launcher,
        denv.master_addr, denv.master_port, backend, ", elastic" if elastic else "",
    )
    rendezvous(backend, denv.master_addr, denv.master_port, denv.rank, denv.world_size,
               timeout_s, elastic, denv.local_rank, bind=bind, run_dir=run_dir,
               all_here=denv.local_size == denv.world_size)
    return denv


def choose_backend(device: str, local_size: int | None, forced: str | None = None) -> str:
    """The default group's backend for learners on ``device`` (``cpu``, ``cuda``, ``cuda:N``),
    ``local_size`` of them on this node (None: not known, taken as one per GPU), and
    ``forced``, ``ASRDIST_BACKEND``'s value (gloo or nccl) if set.

    CPU learners always get gloo: NCCL cannot reduce CPU tensors. CUDA learners get
    :data:`CUDA_BACKEND` (NCCL for CUDA tensors, gloo for CPU ones), or gloo alone, said in
    the log, where they share GPUs (NCCL refuses two ranks on one GPU). CUDA is only asked
    about for CUDA learners, so a CPU learner never initialises it.
    """
    if forced is not None and forced not in BACKENDS:
        raise AsrdistError(f"{BACKEND_ENV}={forced!r}: use one of {', '.join(BACKENDS)}")
    on_gpu = device.startswith("cuda")
    if not on_gpu:
        if forced == "nccl":
            raise AsrdistError(f"{BACKEND_ENV}=nccl with --device {device}: NCCL cannot "
                               "reduce CPU tensors; use --device cuda or gloo")
        return "gloo"
    if not torch.cuda.is_available():
        raise AsrdistError(f"--device {device}: no CUDA device is available")
    if forced == "gloo":
        return "gloo"
    gpus = 1 if ":" in device else torch.cuda.device_count()  # cuda:N: all on that one
    if local_size is not None and gpus > 0 and local_size > gpus:
        if forced == "nccl":
            raise AsrdistError(f"{BACKEND_ENV}=nccl: {local_size} learners on this node share "
                               f"{gpus} GPU(s), which NCCL refuses; use gloo")
        log.warning("%d learners share %d GPU(s) on this node: NCCL refuses two ranks on one "
                    "GPU, so the learners use gloo (CUDA tensors staged through host memory)",
                    local_size, gpus)
        return "gloo"
    return CUDA_BACKEND


def rendezvous(backend: str, addr: str, port: int, rank: int, world_size: int,
               timeout_s: float, elastic: bool = False, local_rank: int = 0, *,
               bind: str = "", run_dir: str | None = None, all_here: bool = False) -> None:
    """Initialise torch.distributed's default group through the TCP store at ``addr:port``.

    Fail-stop runs: the store lives in learner 0's process (under torchrun, in its agent's,
    which torch serves on every interface: see docs/threat_model.md). Elastic runs: learner 0 first
    forks the store's own process there, and every learner connects to it as a client
    (:mod:`asrdist.parallel.processes.storehost`), so that losing learner 0 loses no store. Either
    way it listens on ``addr``'s interface alone, or ``bind``'s
    (:mod:`asrdist.parallel.processes.bind`; ``all_here``: every learner is on this host). The run's
    secret comes from the launcher's environment or ``run_dir``
    (:mod:`asrdist.parallel.processes.secret`), before any fork. nccl: the learner's GPU is chosen
    after the fork (a forked CUDA context is unusable).
    """
    secret.establish(run_dir)
    pin_collectives(addr)
    try:
        if elastic:
            if rank == 0:
                pid = storehost.start(port, world_size, timeout_s,
                                      bind=bind_address(addr, bind, all_here), run_dir=run_dir)
                log.info("rendezvous store: process %d (%s) on port %d", pid,
                         storehost.NAME.decode(), port)
            store = storehost.connect(addr, port, timeout_s)
        elif rank == 0 and os.environ.get(AGENT_STORE_ENV) != "True":
            store = _host_store(bind_address(addr, bind, all_here), port, world_size, timeout_s)
        else:
            store = dist.TCPStore(addr, port, world_size, False, timedelta(seconds=timeout_s))
        if "nccl" in backend:
            select_device("cuda", local_rank)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        _same_secret(rank, timeout_s)
    except (RuntimeError, ValueError) as exc:
        raise AsrdistError(
            f"rendezvous of learner {rank} at {addr}:{port} failed: {first_line(exc)}"
        ) from exc


def _same_secret(rank: int, timeout_s: float) -> None:
    """Refuse in one line a learner whose run secret is not learner 0's (a run dir not shared
    between hosts, each with a secret file of its own): every message it signs would be
    refused by the others, and theirs by it."""
    signed = SignedStore(dist.PrefixStore(SECRET_CHECK, dist.distributed_c10d._get_default_store()),
                         SECRET_CHECK)
    if rank == 0:
        signed.set("learner0", "same")
        return
    signed.store.wait(["learner0"])
    deadline = time.monotonic() + min(timeout_s, SECRET_CHECK_S)
    while signed.get("learner0") != "same":  # a forged value first: learner 0's follows
        if time.monotonic() > deadline:
            raise AsrdistError(
                f"learner {rank}: its run secret is not learner 0's (each host made its own "
                f"RUN_DIR/{secret.SECRET_FILE}: a run dir not shared between hosts?); give "
                f"every learner the same {secret.SECRET_ENV}")
        time.sleep(0.1)


def _host_store(bind: str, port: int, world_size: int, timeout_s: float) -> dist.TCPStore:
    """Learner 0's store server, listening on ``bind`` alone (torch's would listen on every
    interface): a socket bound here, handed over as TCPStore's ``master_listen_fd``."""
    sock = listening_socket(bind, port)
    return dist.TCPStore(bind, port, world_size, True, timedelta(seconds=timeout_s),
                         master_listen_fd=sock.detach())


def select_device(requested: str, local_rank: int) -> str:
    """The device of the learner of ``local_rank``, made CUDA's current device: ``cuda`` is the
    GPU of its local rank (the learners of a node share its GPUs round-robin), so one process
    per GPU needs no CUDA_VISIBLE_DEVICES; ``cpu`` or ``cuda:N`` is taken as given."""
    if requested != "cuda" or not torch.cuda.is_available():
        return requested
    index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return f"cuda:{index}"


def join_world(device: str, timeout_s: float, elastic: bool = False, bind: str = "",
               run_dir: str | None = None) -> tuple[Learner, str]:
    """This process as a learner, and its device (:func:`select_device`).

    One learner, without any process group, unless a launcher says world size > 1; then
    torch.distributed is initialised here (:func:`init_from_env`, every collective bounded by
    ``timeout_s``; ``elastic``: the run goes on without a lost learner, learner 0 included;
    ``bind``: the address its store listens on; ``run_dir``: where the run's secret is).
    """
    denv = detect_env()
    if denv is None or denv.world_size <= 1:
        return Learner(node=denv.node if denv else socket.gethostname()), device
    denv = init_from_env(device, timeout_s=timeout_s, elastic=elastic, bind=bind,
                         run_dir=run_dir)
    learner = Learner(denv.rank, denv.world_size, denv.local_rank, denv.node)
    return learner, select_device(device, denv.local_rank)

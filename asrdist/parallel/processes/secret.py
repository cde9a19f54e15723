"""The run's secret: what the learners and the store process share and nobody else knows.

torch's TCPStore has no authentication: any process that reaches its port reads and writes
every key. So nothing secret may go through it, and nothing read from it may be trusted on its
own. The learners instead share a per-run secret, from the launcher's environment
(``ASRDIST_RUN_SECRET``, which a multi-host job whose run dir is not shared must set, the
same on every host) or else from ``RUN_DIR/.run_secret``, mode 0600, made by whichever learner
comes first (a temp file made with ``O_EXCL``, then hard-linked to its name, which fails if
another learner's is there: every learner reads the same secret, never a half-written one).
It keys the outer-state server (:mod:`asrdist.parallel.processes.outer_server`) and signs the
control messages in the store (:mod:`asrdist.parallel.processes.signed`). A resumed run keeps its
run dir's.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from asrdist.errors import AsrdistError

SECRET_ENV = "ASRDIST_RUN_SECRET"
SECRET_FILE = ".run_secret"  # under the run dir
MIN_CHARS = 16

_established: bytes | None = None  # from the run dir's file, once read


def establish(run_dir: str | os.PathLike | None) -> bytes:
    """This run's secret (the environment's, else ``run_dir``'s file, made if absent), kept
    for :func:`current` in this process and the processes it forks."""
    global _established
    from_env = _from_env()
    if from_env is not None:
        return from_env
    if run_dir is None:
        raise AsrdistError(f"a run of several learners needs a secret: set {SECRET_ENV} in the "
                           "launcher's environment or give the run dir (--out)")
    _established = _file_secret(Path(run_dir))
    return _established


def current() -> bytes:
    """The run's secret (:func:`establish` first, or the launcher's ``ASRDIST_RUN_SECRET``)."""
    found = _from_env() or _established
    if found is None:
        raise AsrdistError(f"no run secret: set {SECRET_ENV} or give the run dir (--out)")
    return found


def derive(purpose: str) -> bytes:
    """A key for one use (``purpose``), so that no two uses share the secret itself."""
    return hmac.new(current(), purpose.encode(), hashlib.sha256).digest()


def _from_env() -> bytes | None:
    value = os.environ.get(SECRET_ENV)
    if value is None:
        return None
    if len(value) < MIN_CHARS:
        raise AsrdistError(f"{SECRET_ENV}: {len(value)} characters, fewer than {MIN_CHARS}; use "
                           "a random one (python -c 'import secrets; print(secrets.token_hex())')")
    return value.encode()


def _file_secret(run_dir: Path) -> bytes:
    path = run_dir / SECRET_FILE
    run_dir.mkdir(parents=True, exist_ok=True)
    _make(path)
    return _read(path)


def _make(path: Path) -> None:
    """Write a fresh secret at ``path`` unless another process's is there first."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another learner's came first
            os.link(tmp, path)
    finally:
        tmp.unlink()


def _read(path: Path) -> bytes:
    """The secret at ``path``, refused unless it is a file of this user's that only they read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise AsrdistError(f"{path}: cannot read the run secret: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() \
                or info.st_mode & 0o077:
            raise AsrdistError(f"{path}: refused as the run secret: not a file of this user's "
                               f"with mode 0600 (mode {stat.S_IMODE(info.st_mode):o}, owner "
                               f"{info.st_uid})")
        value = f.read().strip()
    if len(value) < MIN_CHARS:
        raise AsrdistError(f"{path}: the run secret is {len(value)} bytes, fewer than "
                           f"{MIN_CHARS}; remove the file (a new one is made)")
    return value

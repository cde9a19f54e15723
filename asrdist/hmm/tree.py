"""The context-dependency ``tree``: a monophone one made as gmm-init-mono does, read, written.

kaldi-hmm-gmm cannot build a context-dependent tree, so a tree is either monophone or read.
"""

from __future__ import annotations

import os
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path


def monophone_tree(topo: khg.HmmTopology, phone_sets: list[list[int]]) -> khg.ContextDependency:
    """One tree root per phone set (sets.int), as gmm-init-mono --shared-phones."""
    covered = sorted(p for s in phone_sets for p in s)
    if covered != sorted(topo.phones):
        raise AsrdistError("phones/sets.int does not cover exactly the phones of the topology")
    return khg.monophone_context_dependency_shared(
        phone_classes=phone_sets, phone2num_pdf_classes=topo.get_phone_to_num_pdf_classes()
    )


def read_tree(path: str | os.PathLike) -> khg.ContextDependency:
    """A Kaldi binary ``tree`` file (ContextDependency::Write) as a khg ContextDependency."""
    path = Path(path)
    data = path.read_bytes()
    if not data.startswith(b"\0B"):
        raise AsrdistError(f"{path}: not a binary Kaldi tree (text trees are not supported)")
    tree = khg.ContextDependency.__new__(khg.ContextDependency)
    try:
        tree.__setstate__((np.frombuffer(data[2:], dtype=np.int8).tolist(),))
    except RuntimeError as e:
        raise AsrdistError(f"{path}: cannot read the tree ({e})") from e
    return tree


def write_tree(
    path: str | os.PathLike, ctx_dep: khg.ContextDependency, binary: bool = True
) -> None:
    """Write the ``tree`` file with Kaldi's own ContextDependency::Write (bound in khg)."""
    with atomic_path(path) as tmp:
        ctx_dep.write(binary, str(tmp))

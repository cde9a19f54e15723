"""A model file is data: a crafted final.pt or dbn.pt whose pickle would run code is refused
in one line and runs nothing (torch.load with weights_only=True)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.models.dbn import load_dbn
from asrdist.models.final import load_final


class _Payload:
    """Unpickling this calls Path.touch on the marker: code a crafted file would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _crafted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    marker, path = tmp_path / "ran", tmp_path / name
    torch.save({"format": "asrdist-dbn-1", "model": _Payload(marker)}, path,
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return path, marker


def test_a_crafted_final_pt_runs_nothing(tmp_path):
    path, marker = _crafted(tmp_path, "final.pt")
    with pytest.raises(AsrdistError, match="final.pt: not a readable asrdist"):
        load_final(path)
    assert not marker.exists()


def test_a_crafted_dbn_pt_runs_nothing(tmp_path):
    path, marker = _crafted(tmp_path, "dbn.pt")
    with pytest.raises(AsrdistError, match="--init-dbn .*dbn.pt: cannot read"):
        load_dbn(path)
    assert not marker.exists()

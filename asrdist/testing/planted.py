"""What an attacker (or an accident) leaves in a run dir, for the checks that asrdist runs no
code from its inputs and writes nothing outside its output dir: a crafted checkpoint whose
pickle would run code, symbolic links planted where outputs go, and tiny runs to plant them
in. The test suite and the probes (bench/probes/files.py) share them.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from click.testing import CliRunner, Result

from asrdist.cli.compute_loglikes import main as loglikes_main
from asrdist.cli.train import main as train_main
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import FORMAT, checkpoint_dir, list_checkpoints

TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=8", "--shuffle-buffer=32",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=1", "--epochs=1",
        "--checkpoint-every=2", "--keep-checkpoints=2"]


class Payload:
    """Unpickling this creates ``marker`` (``Path.touch``): the code a crafted file runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def craft_checkpoint(path: Path, marker: Path) -> None:
    """Overwrite checkpoint ``path`` with one of this :data:`FORMAT` whose pickle creates
    ``marker`` if anything unpickles it in full: what asrdist's loaders must refuse."""
    torch.save({"format": FORMAT, "model": Payload(marker)}, path)


def craft_ark_entry(scp: Path, marker: Path) -> Path:
    """Point the first entry of ``scp`` at a crafted ark beside it, whose entry kaldiio reads
    with ``pickle.load`` (its ``PKL`` data) and so would create ``marker``; the ark's path."""
    first, *rest = scp.read_text().splitlines(keepends=True)
    key = first.split()[0]
    ark = scp.with_name("crafted.ark")
    ark.write_bytes(f"{key} PKL".encode() + pickle.dumps(Payload(marker)))
    scp.write_text(f"{key} {ark}:{len(key) + 1}\n" + "".join(rest))
    return ark


def invoke(main: object, *args: object) -> Result:
    """A click command run in this process, as its console script would run it."""
    return CliRunner().invoke(main, [str(a) for a in args])  # type: ignore[arg-type]


def train_args(root: Path) -> list[str]:
    """asrdist-train's arguments for a tiny run on a corpus made under ``root``, into
    ``root/run``."""
    data, targets = make_corpus(root / "corpus")
    return ["--data", str(data), "--targets", str(targets), "--out", str(root / "run"), *TINY]


def interrupted_run(root: Path) -> tuple[list[str], Path]:
    """A tiny run trained to step 4 and left as if killed there: the arguments that resume it,
    and its newest checkpoint."""
    args = train_args(root)
    done = invoke(train_main, *args, "--max-steps=4")
    if done.exit_code != 0:
        raise RuntimeError(f"the tiny run failed: {done.output[-2000:]}")
    out = root / "run"
    for name in ("final.pt", ".train.done"):
        (out / name).unlink()
    step = max(list_checkpoints(out, 0))
    return [*args, "--resume"], checkpoint_dir(out, 0) / f"step{step:09d}.pt"


def plant_link(link: Path, victim: Path, content: str = "precious\n") -> None:
    """``victim`` (outside the output dir) holding ``content``, and ``link`` pointing to it."""
    victim.write_text(content)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)


def train_with_planted_lock(root: Path) -> tuple[Result, Path, Path]:
    """asrdist-train on a run dir whose learner-0 lock is a link to a file outside it: the
    result, the link and the file it points to."""
    args = train_args(root)
    link, victim = root / "run" / ".lock.learner0", root / "victim.txt"
    plant_link(link, victim)
    return invoke(train_main, *args), link, victim


def loglikes_with_planted_ark(root: Path) -> tuple[Result, Path, Path]:
    """asrdist-compute-loglikes of a tiny trained model into a dir whose ``loglikes.ark`` is a
    link to a file outside it: the result, the link and the file it points to."""
    args = train_args(root)
    trained = invoke(train_main, *args, "--max-steps=2")
    if trained.exit_code != 0:
        raise RuntimeError(f"the tiny run failed: {trained.output[-2000:]}")
    out = root / "post"
    link, victim = out / "loglikes.ark", root / "victim.ark"
    plant_link(link, victim)
    result = invoke(loglikes_main, "--model", root / "run" / "final.pt", "--data",
                    root / "corpus" / "data", "--out", out)
    return result, link, victim

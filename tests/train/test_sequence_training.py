"""asrdist-train --objective mmi|bmmi|smbr end to end: a cross-entropy BLSTM, its denominator
lattices of the training data (asrdist-decode), then sequence training from it, on one learner
and on two real learner processes of every strategy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from asrdist.cli.train import main as train_main
from asrdist.decode.decode_dir import decode_data_dir
from asrdist.decode.lattice import LatticeOptions
from asrdist.parallel import registry
from asrdist.score.align_text import count_errors
from asrdist.train.metrics import metrics_path, read_metrics
from tests.cli_process import run_cli
from tests.parallel.cli_learners import fork_learners, join_learners
from tests.train.corpus import train_losses
from tests.train.sequence_corpus import SequenceCorpus, make_sequence_corpus

SEARCH = LatticeOptions(beam=10.0, lattice_beam=5.0)  # small lattices: quick steps
MODEL = ["--model=blstm", "--units=24", "--layers=1", "--chunk-len=20",
         "--chunk-left-context=5", "--chunk-right-context=5", "--batch-size=8",
         "--shuffle-buffer=64", "--heldout-utts=4", "--cmvn=none"]


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> tuple[SequenceCorpus, Path, Path]:
    """The corpus, its cross-entropy model (final.pt) and that model's lattices."""
    root = tmp_path_factory.mktemp("seq")
    corpus = make_sequence_corpus(root, utterances=32, noise=1.0)
    ce = root / "ce"
    done = run_train(*_data(corpus, ce), *MODEL, "--epochs=12", "--lr=1.0")
    assert done.returncode == 0, done.stderr[-2000:]
    denlats = root / "denlats"
    decode_data_dir(corpus.graph, corpus.data, denlats, nnet=str(ce / "final.pt"), opts=SEARCH,
                    lmwts=[10], wips=[0.0])
    return corpus, ce / "final.pt", denlats


@dataclass
class Done:
    returncode: int
    stderr: str


def run_train(*args: str) -> Done:
    """asrdist-train with ``args`` as one learner forked from this process (torch imported:
    it starts in milliseconds); its stderr is OUT's err0.txt (its error line, not its log:
    the log stays with pytest's capture)."""
    out = Path(args[args.index("--out") + 1])
    code = join_learners(fork_learners(train_main, list(args), out, world=1), out, limit=120)
    return Done(code[0], (out / "err0.txt").read_text())


def _data(corpus: SequenceCorpus, out: Path) -> list[str]:
    return ["--data", str(corpus.data), "--targets", str(corpus.targets), "--out", str(out)]


def _sequence(system, objective: str) -> list[str]:
    corpus, final, denlats = system
    return ["--objective", objective, "--init-model", str(final), "--denlats", str(denlats),
            "--alignments", str(corpus.ali), *(["--silence-phones=1:2"]
                                                if objective != "mmi" else [])]


def _heldout(out: Path, objective: str) -> list[float]:
    return [r[f"heldout_{objective}"] for r in read_metrics(metrics_path(out, 0))
            if r["kind"] == "heldout"]


@pytest.mark.parametrize("objective", ["mmi", "bmmi", "smbr"])
def test_each_objective_improves_itself_from_the_ce_model(system, tmp_path, objective):
    """Its held-out objective rises from the CE model's epoch by epoch, its training loss
    falls; MMI's and sMBR's models also decode the utterances the lattices came from with
    fewer errors than the CE model did over the same graph (the lattices are that decoding)."""
    corpus, _, denlats = system
    out = tmp_path / objective
    done = run_train(*_data(corpus, out), *MODEL, *_sequence(system, objective),
                   "--epochs=3", "--lr=4", "--log-every=5")
    assert done.returncode == 0, done.stderr[-2000:]
    held = _heldout(out, objective)
    # the CE model's, then each epoch's
    assert len(held) == 4 and held[0] < held[1] < held[2] < held[3]
    losses = [loss for _, loss in train_losses(metrics_path(out, 0))]
    assert losses[-1] < losses[0]
    if objective != "bmmi":
        decode_data_dir(corpus.graph, corpus.data, tmp_path / "decode",
                        nnet=str(out / "final.pt"), opts=SEARCH, lmwts=[10], wips=[0.0])
        before, after = (_wer(corpus.data / "text", d / "score_10_0.0" / "text")
                         for d in (denlats, tmp_path / "decode"))
        assert after < before


def _wer(ref: Path, hyp: Path) -> float:
    def words(path: Path) -> dict[str, list[str]]:
        return {line.split()[0]: line.split()[1:] for line in path.read_text().splitlines()}

    hyps = words(hyp)
    return sum((count_errors(r, hyps.get(u, [])) for u, r in words(ref).items()),
               start=count_errors([], [])).wer


def test_a_resumed_sequence_run_is_the_uninterrupted_one(system, tmp_path):
    args = [*MODEL, *_sequence(system, "mmi"), "--epochs=1", "--log-every=1",
            "--checkpoint-every=2"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert run_train(*_data(system[0], whole), *args).returncode == 0
    first = run_train(*_data(system[0], cut), *args, "--max-steps=3")
    assert first.returncode == 0, first.stderr[-2000:]
    for name in ("final.pt", ".train.done"):  # as if killed after step 3
        (cut / name).unlink()
    again = run_train(*_data(system[0], cut), *args, "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    starts = [r for r in read_metrics(metrics_path(cut, 0)) if r["kind"] == "start"]
    assert [(r["step"], r["resumed"]) for r in starts] == [(0, False), (3, True)]
    assert train_losses(metrics_path(cut, 0)) == train_losses(metrics_path(whole, 0))


STRATEGIES = {"ma": ["--avg-period=2"], "bmuf": ["--avg-period=2"], "diloco": ["--avg-period=2"],
              "streaming-diloco": ["--avg-period=2"], "diloco-async": ["--avg-period=2"],
              "hadpsgd": ["--learners-per-node=1"]}


@pytest.mark.parametrize("algo", [a for a, s in registry.specs().items() if s.multi_learner])
def test_every_strategy_trains_mmi_on_two_learner_processes(system, tmp_path, algo):
    out = tmp_path / "run"
    args = [*_data(system[0], out), *MODEL, *_sequence(system, "mmi"), "--algo", algo,
            "--max-steps=3", "--log-every=1", "--exchange-timeout=30",
            *STRATEGIES.get(algo, [])]
    codes = join_learners(fork_learners(train_main, args, out), out, limit=90)
    assert codes == [0, 0], [(out / f"err{r}.txt").read_text()[-2000:] for r in range(2)]
    assert (out / "final.pt").is_file()
    for rank in range(2):
        assert [s for s, _ in train_losses(metrics_path(out, rank))][-1] == 3


def test_a_cross_entropy_run_ignores_the_sequence_options_saying_so(system, tmp_path):
    done = run_cli("train", *_data(system[0], tmp_path / "ce"), *MODEL, "--max-steps=1",
                   "--denlats", "somewhere", "--boost", "0.5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"does not use --boost 0.5, --denlats somewhere .*objective's.*ignored",
                     done.stderr)


@pytest.mark.parametrize(("change", "message"), [
    (["--denlats="], "--objective mmi needs --denlats"),
    (["--time-masks=2"], "trains whole utterances from --init-model without augmentation: "
                         "drop --time-masks 2"),
    (["--units=16"], r"--init-model \S+final.pt: not a model of this run's shape: units 24 "
                     r"\(here 16\)"),
    (["--silence-phones=sil"], "--silence-phones 'sil': colon-separated phone ids"),
])
def test_bad_sequence_options_are_one_line(system, tmp_path, change, message):
    done = run_train(*_data(system[0], tmp_path / "bad"), *MODEL,
                   *_sequence(system, "mmi"), *change, "--max-steps=1")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert re.search(message, last), done.stderr[-1500:]
    assert "Traceback" not in done.stderr


def test_lattices_of_another_data_dir_are_refused(system, tmp_path):
    corpus, final, _ = system
    empty = tmp_path / "denlats"
    empty.mkdir()
    (empty / "num_jobs").write_text("1\n")
    from asrdist.decode.lattice_io import write_lattices

    write_lattices(empty / "lat.1.gz", [])
    done = run_train(*_data(corpus, tmp_path / "bad"), *MODEL, "--objective=mmi",
                   "--init-model", str(final), "--denlats", str(empty), "--alignments",
                   str(corpus.ali), "--max-steps=1")
    assert done.returncode != 0
    assert "no lattice of any training utterance of --data" in done.stderr.strip().splitlines()[-1]


def test_a_lattice_of_other_frames_is_refused_naming_it(system, tmp_path):
    """Two utterances' lattices swapped: the first read names its file and utterance."""
    import gzip

    from asrdist.decode.lattice_io import iter_lattices_binary, write_lattices

    corpus, final, denlats = system
    with gzip.open(denlats / "lat.1.gz", "rb") as f:
        lattices = dict(iter_lattices_binary(f.read()))
    frames = {line.split()[0]: int(line.split()[1])
              for line in (corpus.data / "utt2num_frames").read_text().splitlines()}
    a = next(iter(lattices))
    b = next(u for u in lattices if frames[u] != frames[a])
    lattices[a], lattices[b] = lattices[b], lattices[a]
    swapped = tmp_path / "denlats"
    swapped.mkdir()
    (swapped / "num_jobs").write_text("1\n")
    write_lattices(swapped / "lat.1.gz", sorted(lattices.items()))
    done = run_train(*_data(corpus, tmp_path / "bad"), *MODEL, "--objective=mmi",
                     "--init-model", str(final), "--denlats", str(swapped), "--alignments",
                     str(corpus.ali), "--max-steps=1")
    assert done.returncode != 0
    assert re.search(rf"lat.1.gz: lattice {a} has {frames[b]} frames, its features "
                     rf"{frames[a]}", done.stderr.strip().splitlines()[-1]), done.stderr[-800:]


def _run_with_alignments(system, tmp_path, alignments: Path) -> Done:
    corpus, final, denlats = system
    return run_train(*_data(corpus, tmp_path / "bad"), *MODEL, "--objective=mmi",
                     "--init-model", str(final), "--denlats", str(denlats), "--alignments",
                     str(alignments), "--max-steps=1")


def test_alignments_other_than_the_targets_are_refused_before_training(system, tmp_path):
    """One frame of one utterance changed to another pdf's transition-id; and a dir
    without final.mdl."""
    import shutil

    from asrdist.kaldi.alignments import read_alignments, write_alignments

    corpus = system[0]
    other = tmp_path / "ali"
    shutil.copytree(corpus.ali, other)
    alignments = dict(read_alignments(corpus.ali / "ali.1.gz"))
    utt = sorted(alignments)[1]
    pdf_of = corpus.system.trans.tid_to_pdf
    first = alignments[utt][0]
    alignments[utt][0] = next(t for t in range(1, len(pdf_of)) if pdf_of[t] != pdf_of[first])
    write_alignments(other / "ali.1.gz", sorted(alignments.items()))
    done = _run_with_alignments(system, tmp_path, other)
    assert done.returncode != 0
    assert re.search(rf"utterance {utt}: --alignments \S+ gives pdf \d+ at frame 0, --targets "
                     rf"{pdf_of[first]}: the targets were not ingested from these alignments",
                     done.stderr.strip().splitlines()[-1]), done.stderr[-800:]
    assert not (tmp_path / "bad" / "final.pt").exists()
    (other / "final.mdl").unlink()
    done = _run_with_alignments(system, tmp_path, other)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].endswith(f"--alignments {other}: no final.mdl")

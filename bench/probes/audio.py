"""Issue 41's audio scenarios, acted out for real: float wav read on the int16 scale, features
that do not match a model refused, and audio cut short through a pipe stopped or warned.

Each probe takes an empty scratch dir and returns ``(ok, detail)``; ``python -m bench.probes
audio`` prints them as rows.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import kaldiio
import numpy as np
import soundfile
from click.testing import Result

from asrdist.cli.compute_loglikes import main as loglikes_main
from asrdist.cli.decode import main as decode_main
from asrdist.cli.features import main as features_main
from asrdist.kaldi.data_dir import Utterance, write_data_dir
from asrdist.testing.planted import invoke
from asrdist.testing.resampled import trained_model, with_sample_rate
from bench.probes.refusal import error_line, said

RATE = 16000


def _chirp(seconds: float = 2.7) -> np.ndarray:
    """A 200 Hz to 3 kHz chirp with a little noise, in [-1, 1]: energy in every mel band well
    above the int16 quantisation."""
    t = np.arange(int(RATE * seconds)) / RATE
    rng = np.random.default_rng(0)
    return 0.4 * np.sin(2 * np.pi * (200 + 500 * t) * t) + 0.01 * rng.standard_normal(t.size)


def _features(scratch: Path, recordings: dict[str, str]) -> tuple[Result, dict]:
    """asrdist-features (fbank) of one utterance per wav.scp value: the result, the features."""
    write_data_dir(scratch / "src", [Utterance(utt, utt.split("-")[0], "words", value)
                                     for utt, value in recordings.items()])
    result = invoke(features_main, scratch / "src", scratch / "fbank")
    scp = scratch / "fbank" / "feats.scp"
    return result, kaldiio.load_scp(str(scp)) if scp.is_file() else {}


def _float_twin(scratch: Path, subtype: str) -> tuple[bool, str]:
    wavs = {"int16": "PCM_16", "float": subtype}
    for name, sub in wavs.items():
        soundfile.write(scratch / f"{name}.wav", _chirp(), RATE, sub)
    result, feats = _features(scratch, {f"u-{n}": str(scratch / f"{n}.wav") for n in wavs})
    if set(feats) != {"u-int16", "u-float"}:
        return False, said(result)
    off = float(np.abs(feats["u-float"] - feats["u-int16"]).max())
    level = float(feats["u-float"].mean() - feats["u-int16"].mean())
    return off < 0.02, (f"fbank of the {subtype} wav within {off:.4f} of its int16 twin's "
                        f"(mean log-mel {level:+.4f} off)")


def float32_wav(scratch: Path) -> tuple[bool, str]:
    """32-bit float wav: the features of its int16 twin"""
    return _float_twin(scratch, "FLOAT")


def float64_wav(scratch: Path) -> tuple[bool, str]:
    """64-bit float wav: the features of its int16 twin"""
    return _float_twin(scratch, "DOUBLE")


def _mismatch(scratch: Path, run: Callable[[Path, Path], Result]) -> tuple[bool, str]:
    """A model trained on 16 kHz features, given a dir of features recorded as 8 kHz."""
    final, data = trained_model(scratch)
    other = with_sample_rate(data, scratch / "data_8k", 8000)
    result = run(final, other)
    line = error_line(result)
    ok = line is not None and str(final) in line and str(other) in line and "8000" in line
    return ok, line or said(result)


def decode_rate_mismatch(scratch: Path) -> tuple[bool, str]:
    """decode: 8 kHz features, 16 kHz model refused naming both"""
    graph = scratch / "graph"  # refused before the graph is read: none needed
    graph.mkdir()
    return _mismatch(scratch, lambda final, data: invoke(
        decode_main, "--graph", graph, "--model", final, "--data", data,
        "--out", scratch / "decode"))


def loglikes_rate_mismatch(scratch: Path) -> tuple[bool, str]:
    """compute-loglikes: 8 kHz features, 16 kHz model refused"""
    return _mismatch(scratch, lambda final, data: invoke(
        loglikes_main, "--model", final, "--data", data, "--out", scratch / "post"))


def _cut_pipe(scratch: Path, fmt: str) -> tuple[bool, str]:
    """A wav.scp pipe giving the first 35% of a whole file: stopped naming the utterance."""
    whole = scratch / f"whole.{fmt.lower()}"
    soundfile.write(whole, _chirp(), RATE, format=fmt)
    cut = f"head -c {whole.stat().st_size * 35 // 100} {whole} |"
    result, feats = _features(scratch, {"u-cut": cut})
    line = error_line(result)
    ok = line is not None and "utterance u-cut" in line and "truncated" in line and not feats
    return ok, line or said(result)


def truncated_mp3_pipe(scratch: Path) -> tuple[bool, str]:
    """truncated mp3 through a pipe: refused naming the utterance"""
    return _cut_pipe(scratch, "MP3")


def truncated_wav_pipe(scratch: Path) -> tuple[bool, str]:
    """truncated wav through a pipe: refused naming the utterance"""
    return _cut_pipe(scratch, "WAV")


@contextlib.contextmanager
def _warnings() -> Iterator[list[str]]:
    """The warnings logged meanwhile (the CLI's own handler writes where click pointed it)."""
    warned: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warned.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    try:
        yield warned
    finally:
        logging.getLogger().removeHandler(handler)


def bare_mp3(scratch: Path) -> tuple[bool, str]:
    """mp3 declaring no length (no Xing frame): warned, naming it"""
    whole = scratch / "whole.mp3"
    soundfile.write(whole, _chirp(), RATE, format="MP3")
    data = whole.read_bytes()
    bare = scratch / "bare.mp3"
    bare.write_bytes(data[data.index(data[:2], 4):])  # from the second frame on
    with _warnings() as warned:
        result, feats = _features(scratch, {"u-bare": f"cat {bare} |"})
    named = [w for w in warned if w.startswith("utterance u-bare: ") and "no length" in w]
    ok = result.exit_code == 0 and "u-bare" in feats and len(named) == 1
    return ok, named[0] if named else said(result)


PROBES: list[Callable[[Path], tuple[bool, str]]] = [
    float32_wav, float64_wav, decode_rate_mismatch, loglikes_rate_mismatch, truncated_mp3_pipe,
    truncated_wav_pipe, bare_mp3,
]

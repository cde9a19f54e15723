"""Study 1's deciding points again, with the held-out utterances split by recording.

Study 1 (:mod:`bench.studies.large_batch`) scored its runs on 100 held-out utterances of the
augmented corpus chosen without ``utt2uniq``, so the speed and reverberated copies of a held-out
recording stayed in training and every held-out CE was optimistic. This reruns, at the rates
Study 1 picked for them, the points whose verdict a shift could move (the baseline and the
random ring at 3 seeds, hadpsgd's and bmuf's points either side of their limits at one) and
sets each beside Study 1's figure. ::

    python -m bench.studies.large_batch_recheck --data DATA --targets TARGETS --cache DIR \\
        [--jobs 2] [--publish]
"""

from __future__ import annotations

import argparse
import math
import statistics

from bench.results import publish, publish_option
from bench.studies import large_batch as lb
from bench.studies.common import study_runs

P = lb.Point
# (point, lr_ref Study 1 picked, seeds, Study 1's CE: the seeds' mean or the one seed's)
POINTS = [(P("single", 1, 16), 0.4, 3, 1.6164), (P("single", 1, 16), 0.2, 1, None),
          (P("adpsgd-random", 16, 64), 0.2, 3, 1.6410),
          (P("adpsgd-random", 16, 128), 0.4, 3, 1.6501),
          (P("hadpsgd", 16, 256), 0.4, 1, 1.6427), (P("hadpsgd", 16, 512), 0.2, 1, 1.6650),
          (P("bmuf", 16, 64), 0.2, 1, 1.6458), (P("bmuf", 16, 256), 0.4, 1, 1.7373)]
EPOCHS = 6  # Study 1's: annealed from epoch 4, one warm-up epoch


def section(ces: dict[tuple[P, float], list[float]], command: str) -> list[str]:
    base = ces[(POINTS[0][0], POINTS[0][1])]
    mean = statistics.mean(base)
    lines = ["## Study 1 rechecked: held-out utterances split by recording", "",
             f"Command: `{command}` (DATA: the mini recipe's `train_aug_mfcc`, 0.75 h clean, "
             "3 h augmented). Held out: 100 recordings with all their copies (utt2uniq). "
             f"{EPOCHS} epochs, Study 1's schedule and models; each point at the rate Study 1 "
             "picked for it.", "",
             f"Baseline (one learner, B = 16): {mean:.4f} (seeds "
             f"{', '.join(f'{c:.4f}' for c in base)}); threshold x 1.02 = {mean * 1.02:.4f}.", "",
             "| strategy | B | lr_ref | seeds | CE | vs baseline | within 2 % | Study 1's CE |",
             "|---|---|---|---|---|---|---|---|"]
    for p, lr, seeds, before in POINTS:
        got = ces[(p, lr)]
        m = statistics.mean(got)
        spread = f" +- {statistics.stdev(got):.4f}" if len(got) > 1 else ""
        lines.append(f"| {p.algo} | {p.batch} | {lr} | {seeds} | {m:.4f}{spread} | "
                     f"{100 * (m / mean - 1):+.1f}% | {'yes' if m <= mean * 1.02 else 'no'} | "
                     f"{before if before is not None else '-'} |")
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the mini recipe's train_aug_mfcc")
    ap.add_argument("--targets", required=True, help="the mini recipe's mono_pdf")
    ap.add_argument("--cache", required=True, help="finished runs, by spec")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once, a process each")
    publish_option(ap, __file__)
    args = ap.parse_args()
    study = argparse.Namespace(data=args.data, targets=args.targets, cache=args.cache,
                               max_utts=0, jobs=args.jobs, epochs=EPOCHS, anneal_start=4,
                               warmup_epochs=1.0, anneal_factor=math.sqrt(2))
    keys = [(p, lr) for p, lr, seeds, _ in POINTS for _ in range(seeds)]
    specs = [lb.make_spec(study, p, lr, seed) for p, lr, seeds, _ in POINTS
             for seed in range(seeds)]
    results = lb.run_all(study_runs(args.data, args.targets, args.cache), study, specs)
    ces: dict[tuple[P, float], list[float]] = {}
    for key, result in zip(keys, results, strict=True):
        ces.setdefault(key, []).append(result["records"][-1]["heldout_ce"])
    command = ("python -m bench.studies.large_batch_recheck --data DATA --targets TARGETS "
               f"--cache DIR --jobs {args.jobs} --publish")
    publish(section(ces, command), args.publish)


if __name__ == "__main__":
    main()

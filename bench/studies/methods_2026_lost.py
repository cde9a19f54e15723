"""The lost learner of issue 34 item 5: :mod:`bench.studies.methods_2026`'s grids at 16 and
64 learners (every strategy, with and without int8: at 64 the compressed rows the plain grid
leaves out) in scenario straggler:0x4+lost:5@0.5 -- learner 0 4x slow and learner 5 (node 1)
lost for good halfway -- beside straggler:0x4 for the same seed, published to a file of its
own so that methods_2026's tables are not rewritten.

    .venv/bin/python -m bench.studies.methods_2026_lost --data recipes/mini/data/train_aug_fbank \\
        --targets recipes/mini/exp/mono_pdf --out exp/methods_2026 --publish
"""

from __future__ import annotations

from bench.results import publish_option
from bench.studies import methods_2026


def main(argv: list[str] | None = None) -> None:
    ap = methods_2026.parser(__doc__.splitlines()[0], ["16lost", "64lost"], [2, 1])
    publish_option(ap, __file__)
    methods_2026.main(methods_2026.checked(ap.parse_args(argv)),
                      module="bench.studies.methods_2026_lost", make="methods-2026-lost")


if __name__ == "__main__":
    main()

"""The compiled part of asrdist (setup.cfg holds the rest of the metadata): the lattice search
and determinizer, asrdist.decode.lattice._native (issue 32: the Python port was measured too
slow for decoding within 1.5x of Kaldi, and kaldifst's graphs cost over 2x their file). Built
by ``pip install -e .`` with the system's g++."""

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# float32 sums must stay unfused and unreordered to give the Python port's bits
NATIVE_FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]

setup(
    ext_modules=[Pybind11Extension("asrdist.decode.lattice._native",
                                   ["asrdist/decode/lattice/csrc/pipeline.cpp",
                                    "asrdist/decode/lattice/csrc/search.cpp"], cxx_std=17,
                                   extra_compile_args=NATIVE_FLAGS)],
    cmdclass={"build_ext": build_ext},
)

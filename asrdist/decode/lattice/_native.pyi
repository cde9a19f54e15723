"""The surface of asrdist.decode.lattice._native (csrc/pipeline.cpp and csrc/search.cpp): what
the Python of this package calls. Arrays are C-contiguous; a bad input raises ValueError."""

import numpy as np
import numpy.typing as npt

class Graph:
    """A decoding graph in OpenFst's const layout."""

    @property
    def num_states(self) -> int: ...
    @property
    def num_arcs(self) -> int: ...

def mapped_graph(path: str, start: int, num_states: int, num_arcs: int, states_at: int,
                 arcs_at: int) -> Graph:
    """A const FST file's state and arc arrays, mapped read-only and shared."""

def flat_graph(path: str, start: int, final: npt.NDArray[np.float32],
               narcs: npt.NDArray[np.int64], arcs: npt.NDArray[np.int32]) -> Graph:
    """A graph from per-state final costs and arc counts and the arcs (n x 4 int32: ilabel,
    olabel, weight bits, next state), in state order."""

class Search:
    """LatticeFasterDecoder's search over a Graph."""

    def __init__(self, graph: Graph, beam: float, max_active: int, min_active: int,
                 lattice_beam: float) -> None: ...
    def decode(self, loglikes: npt.NDArray[np.float32]) -> tuple[bytes, bool]:
        """(raw lattice bytes, reached final) of a frames x transition-ids matrix of
        acwt-scaled log-likelihoods."""

# a compact lattice as flat arrays: start, arcs per state, words, weights (pairs), next states,
# final flags, final weights (pairs), string offsets (arcs', then states' finals), the strings'
# transition-ids
FlatLattice = tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32],
                    npt.NDArray[np.int32], npt.NDArray[np.uint8], npt.NDArray[np.float32],
                    npt.NDArray[np.int64], npt.NDArray[np.int32]]

def compact_lattice(fst: bytes, phone: npt.NDArray[np.int32], starts_phone: npt.NDArray[np.uint8],
                    lattice_beam: float, acoustic_scale: float,
                    cost_offsets: bool = True) -> FlatLattice:
    """The raw lattice's bytes (OpenFst's binary layout) to LatticeDecoder.decode's
    determinized compact lattice."""

def best_paths(start: int, counts: npt.NDArray[np.int64], words: npt.NDArray[np.int32],
               weights: npt.NDArray[np.float32], nexts: npt.NDArray[np.int32],
               finals: npt.NDArray[np.uint8], final_weights: npt.NDArray[np.float32],
               offsets: npt.NDArray[np.int64], labels: npt.NDArray[np.int32],
               points: list[tuple[float, float]]) -> list[tuple[list[int], list[int]]]:
    """sweep.best_path at each (lmwt, wip) of points: (words, transition-ids) pairs."""

def compact_lattice_bytes(start: int, counts: npt.NDArray[np.int64], words: npt.NDArray[np.int32],
                          weights: npt.NDArray[np.float32], nexts: npt.NDArray[np.int32],
                          finals: npt.NDArray[np.uint8], final_weights: npt.NDArray[np.float32],
                          offsets: npt.NDArray[np.int64], labels: npt.NDArray[np.int32]) -> bytes:
    """The lattice as OpenFst's binary VectorFst (compactlattice44): lattice_io's
    compact_lattice_binary bytes after the key."""

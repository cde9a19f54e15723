"""Viterbi-alignment statistics (gmm-acc-stats-ali) and the M-step with mixing up (gmm-est).

Statistics are plain numpy arrays (zeroth, first and second order per Gaussian, counts per
transition-id) so parallel jobs can send them to the parent, which sums them and lets khg's
``mle_am_diag_gmm_update`` and ``TransitionModel.mle_update`` do Kaldi's update.
"""

from __future__ import annotations

from dataclasses import dataclass

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.kaldi.am_gmm import AmDiagGmmParams, DiagGmmParams

ALL_FLAGS = int(khg.GmmUpdateFlags.kGmmAll)


@dataclass
class GmmStats:
    """Sufficient statistics of one EM pass; ``+`` sums those of parallel jobs."""

    occ: list[np.ndarray]  # per pdf: (num_gauss,)
    x: list[np.ndarray]  # per pdf: (num_gauss, dim)
    x2: list[np.ndarray]  # per pdf: (num_gauss, dim)
    trans: np.ndarray  # per transition-id (index 0 unused), float64
    log_like: float = 0.0
    frames: int = 0

    @classmethod
    def zeros(cls, am: AmDiagGmmParams, num_transition_ids: int) -> GmmStats:
        return cls(
            occ=[np.zeros(p.weights.shape[0]) for p in am.pdfs],
            x=[np.zeros(p.inv_vars.shape) for p in am.pdfs],
            x2=[np.zeros(p.inv_vars.shape) for p in am.pdfs],
            trans=np.zeros(num_transition_ids + 1),
        )

    def __add__(self, other: GmmStats) -> GmmStats:
        return GmmStats(
            occ=[a + b for a, b in zip(self.occ, other.occ, strict=True)],
            x=[a + b for a, b in zip(self.x, other.x, strict=True)],
            x2=[a + b for a, b in zip(self.x2, other.x2, strict=True)],
            trans=self.trans + other.trans,
            log_like=self.log_like + other.log_like,
            frames=self.frames + other.frames,
        )

    @staticmethod
    def total(parts: list[GmmStats]) -> GmmStats:
        """The sum of the parallel jobs' statistics."""
        stats = parts[0]
        for part in parts[1:]:
            stats = stats + part
        return stats

    def pdf_occupancy(self) -> np.ndarray:
        return np.array([o.sum() for o in self.occ], dtype=np.float32)


def gaussian_log_likes(pdf: DiagGmmParams, feats: np.ndarray) -> np.ndarray:
    """log(w_g N(x; mu_g, var_g)) per frame and Gaussian, as DiagGmm::LogLikelihoods."""
    x = feats.astype(np.float64)
    return (
        pdf.gconsts.astype(np.float64)[None, :]
        + x @ pdf.means_invvars.T.astype(np.float64)
        - 0.5 * (x * x) @ pdf.inv_vars.T.astype(np.float64)
    )


def accumulate(
    stats: GmmStats, am: AmDiagGmmParams, feats: np.ndarray, pdfs: np.ndarray, tids: np.ndarray,
    stats_feats: np.ndarray | None = None,
) -> None:
    """Add frames aligned to pdf-ids ``pdfs`` (transition-ids ``tids``) into ``stats``.

    The Gaussians' posteriors are of ``feats``; ``stats_feats`` (the same frames otherwise
    transformed) are what is accumulated, when given: gmm-acc-stats-twofeats, which a
    speaker-adapted system's alignment model is estimated with. Frames are grouped by pdf, so
    one matrix product per pdf replaces a call per frame.
    """
    stats_feats = feats if stats_feats is None else stats_feats
    stats.trans += np.bincount(tids, minlength=stats.trans.shape[0])
    stats.frames += feats.shape[0]
    order = np.argsort(pdfs, kind="stable")
    bounds = np.flatnonzero(np.diff(pdfs[order])) + 1
    for rows in np.split(order, bounds):
        pdf = int(pdfs[rows[0]])
        ll = gaussian_log_likes(am.pdfs[pdf], feats[rows])
        top = ll.max(axis=1, keepdims=True)
        post = np.exp(ll - top)
        total = post.sum(axis=1, keepdims=True)
        stats.log_like += float((top + np.log(total)).sum())
        post /= total
        x = stats_feats[rows].astype(np.float64)
        stats.occ[pdf] += post.sum(axis=0)
        stats.x[pdf] += post.T @ x
        stats.x2[pdf] += post.T @ (x * x)


def to_khg_accs(stats: GmmStats, am: khg.AmDiagGmm) -> khg.AccumAmDiagGmm:
    """Load numpy statistics into khg's AccumAmDiagGmm.

    khg gives no write access to its per-pdf accumulators (``get_acc`` returns a copy), so
    each Gaussian's statistics are added as two weighted points mean +- stddev, occ/2 each:
    they have exactly the Gaussian's zeroth, first and second-order statistics.
    """
    accs = khg.AccumAmDiagGmm()
    accs.init(am, ALL_FLAGS)
    for pdf, occ in enumerate(stats.occ):
        for g in np.flatnonzero(occ > 0.0):
            mean = stats.x[pdf][g] / occ[g]
            std = np.sqrt(np.maximum(stats.x2[pdf][g] / occ[g] - mean * mean, 0.0))
            for point in (mean + std, mean - std):
                accs.accumulate_for_gaussian(
                    am, point.astype(np.float32), pdf, int(g), float(occ[g] / 2)
                )
    return accs


@dataclass
class UpdateResult:
    """What gmm-est prints: objective improvements and the model size after mixing up."""

    gmm_impr_per_frame: float
    trans_impr_per_frame: float
    num_gauss: int


def estimate(
    am: khg.AmDiagGmm,
    trans_model: khg.TransitionModel,
    stats: GmmStats,
    mixup: int,
    min_gaussian_occupancy: float = 10.0,
    power: float = 0.25,
    min_count: float = 20.0,
    perturb_factor: float = 0.01,
    remove_low_count_gaussians: bool = True,
    seed: int | tuple[int, ...] = 0,
) -> UpdateResult:
    """gmm-est: transition and GMM ML update, then split Gaussians up to ``mixup`` in total
    (the split's perturbation drawn from ``seed``: a pass's seed makes a run repeatable).

    ``remove_low_count_gaussians`` False keeps a Gaussian under ``min_gaussian_occupancy``
    as it was (gmm-est --remove-low-count-gaussians=false)."""
    t_impr, t_count = trans_model.mle_update(stats.trans, khg.MleTransitionUpdateConfig())
    opts = khg.MleDiagGmmOptions(min_gaussian_occupancy=min_gaussian_occupancy,
                                 remove_low_count_gaussians=remove_low_count_gaussians)
    g_impr, g_count = khg.mle_am_diag_gmm_update(
        config=opts, amdiag_gmm_acc=to_khg_accs(stats, am), flags=ALL_FLAGS, am_gmm=am
    )
    if mixup > 0:  # as gmm-est --mix-up: pdfs whose share of ``mixup`` exceeds their size split
        split_by_count(am, stats.pdf_occupancy(), mixup, power, min_count, perturb_factor,
                       seed)
    am.compute_gconsts()
    return UpdateResult(
        gmm_impr_per_frame=g_impr / max(g_count, 1.0),
        trans_impr_per_frame=t_impr / max(t_count, 1.0),
        num_gauss=am.num_gauss,
    )


def split_by_count(am: khg.AmDiagGmm, occs: np.ndarray, mixup: int, power: float,
                   min_count: float, perturb_factor: float, seed: int | tuple[int, ...]) -> None:
    """AmDiagGmm::SplitByCount with a repeatable perturbation.

    khg's split draws its perturbation from a generator seeded anew in every process, so the
    same training run gave other models each time (the digits' lucas split: 0.4 % or 7.4 %
    tri3 from one command). Here khg splits without perturbation (the heaviest component is
    halved and copied: which ones split depends on the weights only), then each set of equal
    components (one and its copies) moves apart by ``perturb_factor`` standard deviations times
    normal draws from ``seed``, the draws centred so the set's weighted mean stays where it was,
    as each of DiagGmm::Split's +- pairs keeps it."""
    before = [am.num_gauss_in_pdf(p) for p in range(am.num_pdfs)]
    am.split_by_count(state_occs=occs, target_components=mixup, perturb_factor=0.0,
                      power=power, min_count=min_count)
    rng = np.random.default_rng(seed)
    for pdf, n_before in enumerate(before):
        n_after = am.num_gauss_in_pdf(pdf)
        if n_after == n_before:
            continue
        gmm = am.get_pdf(pdf)
        weights = np.asarray(gmm.weights, dtype=np.float64)
        means = np.asarray(gmm.means, dtype=np.float64)
        stds = np.sqrt(np.asarray(gmm.vars, dtype=np.float64))
        sets: dict[bytes, list[int]] = {}
        for g in range(n_after):
            sets.setdefault(means[g].tobytes() + stds[g].tobytes(), []).append(g)
        for members in sets.values():
            if len(members) == 1:
                continue
            draws = rng.standard_normal((len(members), means.shape[1]))
            share = weights[members] / weights[members].sum()
            draws -= share @ draws
            for g, z in zip(members, draws, strict=True):
                am.set_gaussian_mean(pdf, g, (means[g] + perturb_factor * stds[g] * z)
                                     .astype(np.float32))

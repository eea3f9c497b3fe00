"""Out-of-scope detectors against independent computations: scipy's logsumexp for the
energy score, scikit-learn's covariance estimators for the Mahalanobis distance and its
NearestNeighbors for the k-th neighbour distance; save/load round trips; bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import logsumexp, softmax
from sklearn.covariance import EmpiricalCovariance, LedoitWolf
from sklearn.neighbors import NearestNeighbors

from headwise.intent.decision.ood import (
    DETECTORS,
    OOD_ARRAYS,
    OOD_FILE,
    EnergyDetector,
    KnnDetector,
    MahalanobisDetector,
    MaxProbDetector,
    load_detector,
    make_detector,
    save_detector,
)

RNG = np.random.default_rng(0)
N_CLASSES, DIM = 4, 6
CENTRES = RNG.normal(0, 3, (N_CLASSES, DIM))
LABELS = np.repeat(np.arange(N_CLASSES), 30)
FEATURES = CENTRES[LABELS] + RNG.normal(0, 1, (len(LABELS), DIM)) * [1, 2, 0.5, 1, 1, 3]
LOGITS = RNG.normal(0, 2, (len(LABELS), N_CLASSES))
QUERIES = np.vstack([CENTRES + RNG.normal(0, 0.5, CENTRES.shape),
                     RNG.normal(0, 10, (8, DIM))])
Q_LOGITS = RNG.normal(0, 3, (len(QUERIES), N_CLASSES)) * 5


def _fitted(name: str, **params):
    return make_detector(name, **params).fit(FEATURES, LOGITS, LABELS)


@pytest.mark.parametrize("t", [1.0, 2.5])
def test_energy_is_t_logsumexp_of_logits_over_t(t):
    det = _fitted("energy", temperature=t)
    want = t * logsumexp(Q_LOGITS / t, axis=1)  # the negative free energy, Liu et al. 2020
    np.testing.assert_allclose(det.score(None, Q_LOGITS), want, rtol=1e-12)
    # large logits do not overflow
    big = np.array([[1000.0, 999.0, -5.0, 0.0]])
    np.testing.assert_allclose(det.score(None, big), t * logsumexp(big / t, axis=1))


@pytest.mark.parametrize("t", [1.0, 0.7])
def test_max_prob_is_the_top_softmax_probability(t):
    det = _fitted("max_prob", temperature=t)
    np.testing.assert_allclose(det.score(None, Q_LOGITS), softmax(Q_LOGITS / t, axis=1).max(1),
                               rtol=1e-12)


@pytest.mark.parametrize("covariance, estimator", [("empirical", EmpiricalCovariance),
                                                   ("ledoit_wolf", LedoitWolf)])
def test_mahalanobis_matches_scikit_learn(covariance, estimator):
    det = _fitted("mahalanobis", covariance=covariance)
    means = np.stack([FEATURES[LABELS == c].mean(0) for c in range(N_CLASSES)])
    np.testing.assert_allclose(det.means, means, rtol=1e-12)
    # Lee et al. 2018: one covariance of the vectors minus their own class mean
    cov = estimator(assume_centered=True).fit(FEATURES - means[LABELS])
    dist = np.stack([cov.mahalanobis(QUERIES - means[c]) for c in range(N_CLASSES)], 1)
    np.testing.assert_allclose(det.distances(QUERIES), dist, rtol=1e-9)
    np.testing.assert_allclose(det.score(QUERIES, None), -dist.min(1), rtol=1e-9)
    # behaviour: near a class centre scores above far away
    s = det.score(QUERIES, None)
    assert s[:N_CLASSES].min() > s[N_CLASSES:].max()


def test_mahalanobis_with_fewer_rows_than_dimensions_uses_the_pseudo_inverse():
    x = RNG.normal(size=(5, 12))
    y = np.array([0, 0, 1, 1, 1])
    det = MahalanobisDetector().fit(x, None, y)
    means = np.stack([x[y == c].mean(0) for c in (0, 1)])
    centred = x - means[y]
    precision = np.linalg.pinv(centred.T @ centred / len(x))
    q = RNG.normal(size=(3, 12))
    want = np.stack([np.einsum("nd,de,ne->n", q - m, precision, q - m) for m in means], 1)
    np.testing.assert_allclose(det.distances(q), want, rtol=1e-7, atol=1e-9)


def test_mahalanobis_leaves_out_a_class_without_rows():
    det = MahalanobisDetector().fit(FEATURES, LOGITS, np.where(LABELS == 2, 3, LABELS))
    assert det.classes.tolist() == [0, 1, 3]  # class 2 has no training row, no mean


@pytest.mark.parametrize("k", [1, 10])
def test_knn_is_the_kth_neighbour_distance_of_normalised_vectors(k):
    det = _fitted("knn", k=k)
    unit = FEATURES / np.linalg.norm(FEATURES, axis=1, keepdims=True)
    q_unit = QUERIES / np.linalg.norm(QUERIES, axis=1, keepdims=True)
    nn = NearestNeighbors(n_neighbors=k).fit(unit)
    want = nn.kneighbors(q_unit)[0][:, -1]
    np.testing.assert_allclose(det.score(QUERIES, None), -want, atol=1e-6)  # float32 bank
    # exactly against the stored float32 bank
    exact = NearestNeighbors(n_neighbors=k).fit(det.bank.astype(np.float64))
    np.testing.assert_allclose(det.kth_distance(QUERIES), exact.kneighbors(q_unit)[0][:, -1],
                               rtol=1e-9, atol=1e-12)
    # cosine: a rescaled query scores the same
    np.testing.assert_allclose(det.score(7.0 * QUERIES, None), det.score(QUERIES, None),
                               atol=1e-12)


def test_knn_chunks_give_the_same_answer(monkeypatch):
    """Scoring in chunks of queries gives the scores of one product (to the last bits a
    BLAS kernel's blocking may change) and the same decisions."""
    import headwise.intent.decision.ood.knn as knn

    det = _fitted("knn", k=3)
    det.threshold = float(np.median(det.score(QUERIES, None)))
    whole, rejected = det.score(QUERIES, None), det.reject(QUERIES, None)
    monkeypatch.setattr(knn, "CHUNK", 2)
    np.testing.assert_allclose(det.score(QUERIES, None), whole, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(det.reject(QUERIES, None), rejected)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_save_load_round_trip(name, tmp_path):
    det = _fitted(name)
    det.threshold = -1.25
    save_detector(det, tmp_path)
    back = load_detector(tmp_path)
    assert type(back) is type(det) and back.params() == det.params()
    assert back.threshold == -1.25 and back.num_classes == N_CLASSES
    np.testing.assert_array_equal(back.score(QUERIES, Q_LOGITS), det.score(QUERIES, Q_LOGITS))
    np.testing.assert_array_equal(back.reject(QUERIES, Q_LOGITS),
                                  det.score(QUERIES, Q_LOGITS) < -1.25)
    meta = json.loads((tmp_path / OOD_FILE).read_text())
    assert meta["detector"] == name
    assert (tmp_path / OOD_ARRAYS).exists() == det.needs_features  # logits-only: no arrays


def test_a_new_threshold_keeps_the_arrays_and_mismatched_arrays_are_refused(tmp_path):
    det = _fitted("knn", k=2)
    det.threshold = -0.5
    save_detector(det, tmp_path)
    weights = (tmp_path / OOD_ARRAYS).read_bytes()
    det.threshold = -0.1
    save_detector(det, tmp_path, arrays=False)
    assert (tmp_path / OOD_ARRAYS).read_bytes() == weights
    assert load_detector(tmp_path).threshold == -0.1
    other = KnnDetector(k=2).fit(FEATURES + 1.0, None, None)
    other.threshold = -0.3
    save_detector(other, tmp_path)  # a second save, whose arrays are then swapped back
    (tmp_path / OOD_ARRAYS).write_bytes(weights)
    with pytest.raises(ValueError, match="not the arrays file"):
        load_detector(tmp_path)
    (tmp_path / OOD_ARRAYS).unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        load_detector(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_detector(tmp_path / "nowhere")
    (tmp_path / OOD_FILE).write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a headwise"):
        load_detector(tmp_path)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one of"):
        make_detector("odin")
    with pytest.raises(ValueError, match="knn:K"):
        make_detector("energy:3")
    assert make_detector("knn:7").k == 7
    assert make_detector("mahalanobis:ledoit_wolf").covariance == "ledoit_wolf"
    with pytest.raises(ValueError, match="one of"):
        make_detector("mahalanobis:7")
    with pytest.raises(ValueError, match="one of"):
        make_detector("knn:0")
    with pytest.raises(ValueError, match="positive integer"):
        KnnDetector(k=0)
    with pytest.raises(ValueError, match="positive"):
        EnergyDetector(temperature=0.0)
    with pytest.raises(ValueError, match="positive"):
        MaxProbDetector(temperature=-1.0)
    with pytest.raises(ValueError, match="covariance"):
        MahalanobisDetector(covariance="graphical_lasso")
    with pytest.raises(RuntimeError, match="not fitted"):
        KnnDetector().score(QUERIES, None)
    with pytest.raises(RuntimeError, match="no threshold"):
        _fitted("energy").reject(None, Q_LOGITS)
    with pytest.raises(ValueError, match="at least 200"):
        KnnDetector(k=200).fit(FEATURES, None, None)
    with pytest.raises(ValueError, match="labels"):
        MahalanobisDetector().fit(FEATURES, None, None)
    with pytest.raises(ValueError, match="class ids"):
        MahalanobisDetector().fit(FEATURES, LOGITS, LABELS + 1)
    with pytest.raises(ValueError, match="integer"):
        MahalanobisDetector().fit(FEATURES, None, LABELS.astype(float))
    with pytest.raises(ValueError, match="features are needed"):
        KnnDetector().fit(None, LOGITS, LABELS)
    with pytest.raises(ValueError, match="needs the logits"):
        EnergyDetector().fit(FEATURES, None, LABELS)
    bad = FEATURES.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        KnnDetector().fit(bad, None, None)
    det = _fitted("mahalanobis")
    with pytest.raises(ValueError, match="6-d features"):
        det.score(QUERIES[:, :5], None)
    with pytest.raises(ValueError, match="non-empty"):
        det.score(QUERIES[0], None)
    with pytest.raises(ValueError, match="4 intents"):
        _fitted("energy").score(None, Q_LOGITS[:, :3])
    with pytest.raises(ValueError, match="feature rows"):
        KnnDetector().fit(FEATURES, LOGITS[:5], None)


def test_detector_products_equal_numpys_for_the_arrays_scoring_passes():
    """The detectors' matrix products run on PyTorch's threads (ood.base.matmul) and equal
    numpy's ``@``: mixed float32/float64 promoted as numpy does, transposed and sliced
    views, read-only arrays (a bank loaded from a file), no rows."""
    from headwise.intent.decision.ood.base import matmul

    rng = np.random.default_rng(0)
    a32 = rng.normal(size=(5, 7)).astype(np.float32)
    b64 = rng.normal(size=(9, 7))
    got = matmul(a32, b64.T)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a32 @ b64.T, rtol=1e-12, atol=1e-12)
    view = rng.normal(size=(12, 7))[::2]
    frozen = b64.copy()
    frozen.flags.writeable = False
    np.testing.assert_allclose(matmul(view, frozen.T), view @ frozen.T, rtol=1e-12)
    assert frozen.flags.writeable is False  # not changed in place
    assert matmul(np.zeros((0, 7)), b64.T).shape == (0, 9)
    a = rng.normal(size=(4, 7)).astype(np.float32)
    b = rng.normal(size=(7, 3)).astype(np.float32)
    assert matmul(a, b).dtype == np.float32
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5, atol=1e-6)

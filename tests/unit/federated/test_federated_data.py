import numpy as np
import pytest

from testbed.federated.data import load_dataset, partition

SITES = [f"s{i}" for i in range(10)]


@pytest.fixture(scope="module")
def data():
    return load_dataset("digits")


@pytest.mark.parametrize("scheme", ["iid", "dirichlet"])
def test_partition_is_a_seeded_disjoint_cover(data, scheme):
    a = partition(data, SITES, scheme=scheme, alpha=0.3, seed=5)
    b = partition(data, SITES, scheme=scheme, alpha=0.3, seed=5)
    c = partition(data, SITES, scheme=scheme, alpha=0.3, seed=6)
    for s in SITES:
        assert np.array_equal(a.indices[s], b.indices[s])
    assert any(not np.array_equal(a.indices[s], c.indices[s]) for s in SITES)
    everything = np.concatenate([a.indices[s] for s in SITES])
    assert len(everything) == data.n_train == len(np.unique(everything))
    assert min(a.n(s) for s in SITES) >= 2


def test_iid_shares_differ_by_at_most_one(data):
    sh = partition(data, SITES, scheme="iid", seed=1)
    sizes = [sh.n(s) for s in SITES]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_small_alpha_is_skewed(data):
    iid = partition(data, SITES, scheme="iid", seed=1)
    skew = partition(data, SITES, scheme="dirichlet", alpha=0.05, seed=1)

    def classes_seen(sh):
        return np.mean([sum(c > 0 for c in sh.class_counts(s)) for s in SITES])

    assert classes_seen(skew) < classes_seen(iid) - 3


def test_unknown_scheme_and_dataset(data):
    with pytest.raises(ValueError, match="unknown partition"):
        partition(data, SITES, scheme="nope")
    with pytest.raises(ValueError, match="unknown federated dataset"):
        load_dataset("emnist")

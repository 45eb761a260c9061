from collections import OrderedDict

import torch

from testbed.federated import fedavg
from testbed.federated.data import load_dataset, partition


def test_average_is_the_sample_weighted_mean_exactly():
    a = OrderedDict(w=torch.tensor([1.0, 2.0]), b=torch.tensor([0.0]))
    b = OrderedDict(w=torch.tensor([4.0, -1.0]), b=torch.tensor([3.0]))
    out = fedavg.average([a, b], [1, 2])
    assert torch.equal(out["w"], torch.tensor([3.0, 0.0]))
    assert torch.equal(out["b"], torch.tensor([2.0]))
    assert out["w"].dtype == torch.float32


def test_average_of_identical_states_is_that_state():
    m = fedavg.make_model("mlp", hidden=8, n_classes=10, seed=1)
    s = fedavg.clone_state(m)
    out = fedavg.average([s, s, s], [5, 1, 7])
    assert all(torch.allclose(out[k], s[k], rtol=0, atol=1e-7) for k in s)


def test_local_training_is_deterministic_and_learns():
    data = load_dataset("digits")
    sh = partition(data, ["a", "b"], seed=0)
    m = fedavg.make_model("mlp", hidden=32, n_classes=10, seed=2)
    start = fedavg.clone_state(m)
    acc0 = fedavg.accuracy(m, start, data.x_test, data.y_test)
    kw = dict(epochs=5, batch_size=16, lr=0.3, momentum=0.0, seed=9)
    s1 = fedavg.local_train(m, start, sh.x("a"), sh.y("a"), **kw)
    s2 = fedavg.local_train(m, start, sh.x("a"), sh.y("a"), **kw)
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert fedavg.accuracy(m, s1, data.x_test, data.y_test) > acc0 + 0.3


def test_same_seed_same_initial_model():
    a = fedavg.clone_state(fedavg.make_model("cnn", hidden=8, n_classes=10, seed=4))
    b = fedavg.clone_state(fedavg.make_model("cnn", hidden=8, n_classes=10, seed=4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert len(fedavg.serialize(a)) > 1000

"""The gloo world's pickling (impl/distributed/tensor_pickle.py): a plain CPU tensor travels as its storage's bytes
and comes back as torch's own pickling gives it back (dtype, shape, strides, offset, values, shared storages); any
other tensor goes through torch's reduction unchanged."""
from __future__ import annotations

import pickle

import pytest
import torch

from impl.distributed import tensor_pickle

pytestmark = [pytest.mark.cpu]

_BASE = torch.arange(30, dtype=torch.float32).reshape(5, 6)

PLAIN = {
    "float32": torch.randn(3, 4, generator=torch.Generator().manual_seed(1)),
    "bfloat16": torch.tensor([1.5, -2.25, 3.0]).to(torch.bfloat16),
    "int64": torch.tensor([7, -3, 2 ** 40]),
    "bool": torch.tensor([True, False, True]),
    "0-d": torch.tensor(2.5),
    "empty": torch.zeros(0, 4),
    "transposed": _BASE.t(),
    "offset view": _BASE[2:, 1::2],
}


def _same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert (actual.dtype, actual.shape, actual.stride(), actual.storage_offset()) == \
        (expected.dtype, expected.shape, expected.stride(), expected.storage_offset())
    assert torch.equal(actual, expected)


@pytest.mark.parametrize("name", list(PLAIN))
def test_a_plain_tensor_comes_back_as_torch_pickling_gives_it(name: str) -> None:
    tensor = PLAIN[name]
    assert tensor_pickle.plain(tensor)
    _same(pickle.loads(tensor_pickle.dumps(tensor)), pickle.loads(pickle.dumps(tensor)))
    _same(pickle.loads(tensor_pickle.dumps(tensor)), tensor)


@pytest.mark.parametrize("name", list(PLAIN))
def test_a_plain_tensor_travels_by_its_bytes_not_through_torch_save(name: str) -> None:
    data = tensor_pickle.dumps(PLAIN[name])
    assert b"_load_from_bytes" not in data and b"impl.distributed.tensor_pickle" in data


def test_views_of_one_storage_still_share_one_storage_and_it_is_sent_once() -> None:
    whole = torch.arange(4096, dtype=torch.float32)
    first, second = pickle.loads(tensor_pickle.dumps([whole, whole[100:200]]))
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    first[150] = -1.0
    assert second[50] == -1.0
    assert len(tensor_pickle.dumps([whole, whole[100:200]])) < 2 * whole.numel() * whole.element_size()


def test_a_loaded_tensor_owns_its_memory() -> None:
    data = tensor_pickle.dumps(torch.ones(3))
    loaded = pickle.loads(data)
    del data
    loaded += 1
    assert loaded.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("tensor, kept", [
    (torch.nn.Parameter(torch.ones(2)), lambda t: type(t) is torch.nn.Parameter and t.requires_grad),
    (torch.ones(2, requires_grad=True), lambda t: type(t) is torch.Tensor and t.requires_grad),
    (torch.tensor([1 + 2j, 3 - 1j]).conj(), lambda t: t.is_conj()),
], ids=["parameter", "requires_grad", "conjugate"])
def test_any_other_tensor_goes_through_torch_pickling(tensor: torch.Tensor, kept) -> None:
    assert not tensor_pickle.plain(tensor) or type(tensor) is not torch.Tensor
    loaded = pickle.loads(tensor_pickle.dumps(tensor))
    assert kept(loaded)
    assert torch.equal(loaded.detach().resolve_conj(), tensor.detach().resolve_conj())


def test_a_tensor_with_python_attributes_keeps_them() -> None:
    tensor = torch.ones(2)
    tensor.note = "kept"
    assert not tensor_pickle.plain(tensor)
    assert pickle.loads(tensor_pickle.dumps(tensor)).note == "kept"


def test_everything_else_pickles_as_pickle_does() -> None:
    value = {"ints": [1, 2], "nested": ({"x": None}, 3.5, "text", b"raw"), "type": torch.float32}
    assert pickle.loads(tensor_pickle.dumps(value)) == value
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        tensor_pickle.dumps(lambda: None)

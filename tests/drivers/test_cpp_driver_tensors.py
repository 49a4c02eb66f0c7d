"""The C++ driver reads and writes protocol version 2's tensors (issue 29 item 1): `$tensor` values in hand-made
frames (wire_v2.py) come back bit for bit, and tensors computed in C++ (drivers/cpp/src/driver/tensor.h) match
independent references: numpy for float16, a nearest-value search over every 16-bit code for bfloat16 and float16.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tests.drivers.wire_v2 import BUFFERS, DTYPES, Raw, Worker, tag

pytestmark = pytest.mark.cpu

RNG = np.random.default_rng(29)


def _sample(dtype: str, shape: tuple[int, ...]) -> Raw:
    """Elements of every bit pattern the dtype has (NaN payloads and subnormals included; bool 0 or 1)."""
    count = int(np.prod(shape))
    if dtype == "bool":
        return Raw.of(RNG.integers(0, 2, size=shape).astype(bool))
    width = np.dtype(DTYPES[dtype]).itemsize
    data = RNG.integers(0, 256, size=count * width, dtype=np.uint8).tobytes()
    return Raw(dtype, shape, data)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(2, 3), (), (0,), (4, 0, 2), (1, 1, 5)])
def test_every_dtype_and_shape_comes_back_bit_for_bit(v2_ready: Worker, dtype: str, shape: tuple[int, ...]) -> None:
    sent = _sample(dtype, shape)
    buffers: list[bytes] = []
    reply = v2_ready.call("driver-echo", [tag(sent, buffers)], buffers)
    assert reply.word & BUFFERS and len(reply.buffers) == 1
    assert reply.body["result"]["value"] == [{"$tensor": {"dtype": dtype, "shape": list(shape), "buffer": 0}}]
    assert reply.buffers[0] == sent.data


def test_tensors_anywhere_a_value_may_be_take_their_own_buffers(v2_ready: Worker) -> None:
    a = Raw.of(np.arange(6, dtype=np.int64).reshape(2, 3))
    b = Raw.of(np.array([1.5, -0.0, np.inf], dtype=np.float32))
    c = Raw.of(np.array(7, dtype=np.int16))
    buffers = [c.data, a.data, b.data]  # tags name them out of order
    wire = {"$map": [["list", [{"$tensor": {"dtype": "int64", "shape": [2, 3], "buffer": 1}}, 5]],
                     ["tuple", {"$tuple": [{"$tensor": {"shape": [3], "buffer": 2, "dtype": "float32"}}]}],
                     [7, {"$tensor": {"buffer": 0, "dtype": "int16", "shape": []}}]]}
    reply = v2_ready.call("driver-echo", wire, buffers)
    assert len(reply.buffers) == 3
    value = reply.body["result"]["value"]["$map"]  # the tuple comes back as a list (§7.3 "Comparison")
    got = {key: item for key, item in value}
    assert reply.buffers[got["list"][0]["$tensor"]["buffer"]] == a.data
    assert reply.buffers[got["tuple"][0]["$tensor"]["buffer"]] == b.data
    assert reply.buffers[got[7]["$tensor"]["buffer"]] == c.data
    assert sorted(t["$tensor"]["buffer"] for t in (got["list"][0], got["tuple"][0], got[7])) == [0, 1, 2]


def test_a_frame_without_tensors_is_a_version_1_frame(v2_ready: Worker) -> None:
    reply = v2_ready.call("driver-echo", [1, 2.5])
    assert not reply.word & BUFFERS and reply.buffers == []


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_elements_read_through_the_tensor_type(v2_ready: Worker, dtype: str) -> None:
    sent = _sample(dtype, (3, 4))
    if dtype in ("float16", "float32", "float64", "bfloat16"):  # NaN payloads do not survive a trip through a double
        array = sent.array()
        bits = array.view(f"<u{array.dtype.itemsize}")
        exponent_all_ones = {"float16": 0x7C00, "bfloat16": 0x7F80, "float32": 0x7F800000, "float64": 0x7FF0000000000000}
        mask = np.array(exponent_all_ones[dtype], dtype=bits.dtype)
        sent = Raw(dtype, sent.shape, np.where((bits & mask) == mask, bits & ~mask, bits).astype(bits.dtype).tobytes())
    buffers: list[bytes] = []
    got = v2_ready.value("driver-elements", {"$map": [["tensor", tag(sent, buffers)]]}, buffers)
    assert got["dtype"] == dtype and got["shape"] == [3, 4]
    array = sent.array()
    if dtype == "bfloat16":
        array = (array.astype(np.uint32) << 16).view(np.float32)  # the top 16 bits of a float32, by definition
    expected = array.reshape(-1).tolist()
    assert got["elements"] == expected
    assert [type(x) for x in got["elements"]] == [type(x) for x in expected]


def test_int64_extremes_and_float64_specials(v2_ready: Worker) -> None:
    ints = Raw.of(np.array([-(2**63), 2**63 - 1, -1, 0, 2**53 + 1], dtype=np.int64))
    buffers: list[bytes] = []
    got = v2_ready.value("driver-elements", {"$map": [["tensor", tag(ints, buffers)]]}, buffers)
    assert got["elements"] == [-(2**63), 2**63 - 1, -1, 0, 2**53 + 1]
    floats = Raw.of(np.array([5e-324, -0.0, np.inf, -np.inf, 1.7976931348623157e308], dtype=np.float64))
    buffers = []
    got = v2_ready.value("driver-elements", {"$map": [["tensor", tag(floats, buffers)]]}, buffers)
    assert got["elements"] == [5e-324, -0.0, float("inf"), float("-inf"), 1.7976931348623157e308]
    assert str(got["elements"][1]) == "-0.0"


def _nearest_even(values: np.ndarray, fmt: str) -> np.ndarray:
    """Each float32 of `values` as the 16-bit code of the nearest value of `fmt`, ties to the even code, found by a
    search over every positive code (their values rise with the code; inf counts as the next power of two)."""
    top = {"float16": 0x7C00, "bfloat16": 0x7F80}[fmt]
    codes = np.arange(top + 1, dtype=np.uint32)
    if fmt == "float16":
        table = codes.astype(np.uint16).view(np.float16).astype(np.float64)
        table[top] = 2.0**16
    else:
        table = (codes << 16).view(np.float32).astype(np.float64)
        table[top] = 2.0**128
    magnitude = np.abs(values.astype(np.float64))
    upper = np.minimum(np.searchsorted(table, magnitude), top)
    lower = np.maximum(upper - 1, 0)
    below, above = magnitude - table[lower], table[upper] - magnitude  # exact: neighbours within a factor of 2
    pick = np.where(below < above, lower, np.where(above < below, upper, np.where(lower % 2 == 0, lower, upper)))
    pick = np.where(np.isinf(magnitude), top, pick)
    sign = (np.signbit(values).astype(np.uint32) << 15)
    return (pick | sign).astype(np.uint16)


def _special_float32() -> np.ndarray:
    bits = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF, 0x00400000,  # zeros, infs, subnormals
            0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0xFF7F8000, 0x7F7F7FFF,  # bfloat16 ties, overflow
            0x33000000, 0x33000001, 0x33C00000, 0x387FE000, 0x387FF000, 0x38800000,  # float16 subnormal ties
            0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x47800000, 0x3F802000, 0x3F806000]  # 65504, 65520, ties
    random = RNG.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
    random = random[(random & 0x7F800000) != 0x7F800000]  # finite ones; NaNs have their own test
    bfloat16_ties = (random[:2000] & 0xFFFF0000) | 0x8000  # exactly halfway between two bfloat16 codes
    subnormal_ties = ((np.arange(1024) + 0.5) * 2.0**-24).astype(np.float32).view(np.uint32)  # float16 subnormals'
    codes = RNG.integers(0x0400, 0x7BFF, size=2000).astype(np.uint16)  # and float16 normals' midpoints
    normal_ties = ((codes.view(np.float16).astype(np.float64) + (codes + 1).view(np.float16).astype(np.float64)) / 2)
    parts = [np.array(bits, dtype=np.uint32), random, bfloat16_ties, subnormal_ties, normal_ties.astype(np.float32).view(np.uint32)]
    values = np.concatenate(parts).view(np.float32)
    return np.concatenate([values, -values])


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_float32_rounds_to_nearest_even(v2_ready: Worker, fmt: str) -> None:
    values = _special_float32()
    buffers: list[bytes] = []
    got = v2_ready.value("driver-convert", {"$map": [["tensor", tag(Raw.of(values), buffers)], ["dtype", fmt]]}, buffers)
    assert got.dtype == fmt and got.shape == values.shape
    codes = np.frombuffer(got.data, dtype="<u2")
    expected = _nearest_even(values, fmt)
    wrong = np.nonzero(codes != expected)[0]
    assert wrong.size == 0, [(hex(values.view(np.uint32)[i]), hex(codes[i]), hex(expected[i])) for i in wrong[:5]]
    if fmt == "float16":  # numpy agrees
        with np.errstate(over="ignore"):
            assert codes.tolist() == values.astype(np.float16).view(np.uint16).tolist()


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_every_16_bit_code_widens_exactly(v2_ready: Worker, fmt: str) -> None:
    codes = np.arange(1 << 16, dtype=np.uint16)
    buffers: list[bytes] = []
    sent = Raw.of(codes, "bfloat16") if fmt == "bfloat16" else Raw.of(codes.view(np.float16))
    got = v2_ready.value("driver-convert", {"$map": [["tensor", tag(sent, buffers)], ["dtype", "float32"]]}, buffers)
    widened = np.frombuffer(got.data, dtype="<u4")
    if fmt == "bfloat16":
        expected = codes.astype(np.uint32) << 16
    else:
        expected = codes.view(np.float16).astype(np.float32).view(np.uint32)  # numpy keeps NaN payloads here too
    assert widened.tolist() == expected.tolist()


@pytest.mark.parametrize("fmt, expected", [
    ("bfloat16", [0x7FC0, 0xFFC0, 0x7FC0, 0xFFC0, 0x7FFF, 0x7FE1]),
    ("float16", [0x7E00, 0xFE00, 0x7E00, 0xFE00, 0x7FFF, 0x7F09]),
])
def test_nan_stays_a_quiet_nan_of_its_sign_with_the_top_of_its_payload(v2_ready: Worker, fmt: str, expected: list[int]) -> None:
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FE12345], dtype=np.uint32)
    buffers: list[bytes] = []
    got = v2_ready.value("driver-convert", {"$map": [["tensor", tag(Raw.of(nans.view(np.float32)), buffers)], ["dtype", fmt]]}, buffers)
    assert [hex(c) for c in np.frombuffer(got.data, dtype="<u2")] == [hex(c) for c in expected]


def test_a_tensor_computed_in_cpp_matches_numpy_bit_for_bit(v2_ready: Worker) -> None:
    shape, scale = [25, 40], 100.3
    got = v2_ready.value("driver-arange", {"$map": [["shape", shape], ["scale", scale]]})
    expected = np.arange(1000, dtype=np.float32).reshape(shape) * np.float32(scale)  # float32 arithmetic
    assert got["float32"] == Raw.of(expected)
    with np.errstate(over="ignore"):
        assert got["float16"] == Raw.of(expected.astype(np.float16))  # past 65504: inf
    assert np.isinf(got["float16"].array()).sum() == (expected >= 65520).sum() > 0
    assert got["bfloat16"] == Raw("bfloat16", tuple(shape), _nearest_even(expected.reshape(-1), "bfloat16").tobytes())
    torch = pytest.importorskip("torch")  # a second reference, for these finite normal values
    assert got["bfloat16"].data == torch.from_numpy(expected).to(torch.bfloat16).view(torch.int16).numpy().tobytes()


def test_a_64_mib_tensor_round_trips(v2_ready: Worker) -> None:
    data = RNG.integers(0, 256, size=64 << 20, dtype=np.uint8).tobytes()
    sent = Raw("float32", (16 << 20,), data)
    buffers: list[bytes] = []
    start = time.perf_counter()
    reply = v2_ready.call("driver-echo", tag(sent, buffers), buffers)
    seconds = time.perf_counter() - start
    assert reply.buffers == [data]
    print(f"64 MiB float32 echo through the C++ driver: {seconds * 1000:.0f} ms")


def test_the_reply_still_writes_its_id_first(v2_ready: Worker) -> None:
    buffers: list[bytes] = []
    reply = v2_ready.call("driver-echo", tag(Raw.of(np.zeros(2, np.uint8)), buffers), buffers)
    assert reply.raw_body == f'{{"id":{v2_ready.ids},"result":{{"value":{{"$tensor":{{"dtype":"uint8","shape":[2],"buffer":0}}}}}}}}'.encode()

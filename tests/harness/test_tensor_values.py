"""Tensors as plain values (docs/worker-protocol.md §7.4; issue 29 item 1): numpy arrays and torch tensors encode to
`$tensor` with their bytes in the frame's buffers and decode to numpy arrays, bit for bit; every departure from the
contract is refused naming the path; strict_equal compares dtype, shape and bytes; a report shows a tensor compactly."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import ml_dtypes
import numpy as np
import pytest
import torch

from _vllm_gates.values.compare import strict_equal
from _vllm_gates.values.render import render_value
from _vllm_gates.wire.channel import BUFFERS_FLAG, EXACT_FLAG, MAX_BUFFERS, ProtocolError, frame, parse, receive_buffered, send
from _vllm_gates.wire.plain import NotPlain, decode, encode
from _vllm_gates.wire.tensors import ITEMSIZE

pytestmark = pytest.mark.cpu

NUMPY_DTYPES = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
                "int64": np.int64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
                "float64": np.float64}
TORCH_DTYPES = {name: getattr(torch, name) for name in ITEMSIZE}
BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def travel(value, root: str = "result", writable: bool = False, cap: int = 4 * 1024 ** 3):
    """A value through a real frame: encoded, sent, read, decoded (as the judge does, or a worker with writable)."""
    left, right = socket.socketpair()
    writer = threading.Thread(target=send, args=(left, {"id": 1, "value": encode(value, root, cap)}, cap))
    writer.start()  # a frame bigger than the socket's buffer is read while it is written
    try:
        got = receive_buffered(right, 10, cap)
        return decode(parse(got.body, got.exact)["value"], root, buffers=got.buffers, writable=writable, cap=cap)
    finally:
        writer.join()
        left.close()
        right.close()


def bits(array: np.ndarray) -> list[int]:
    """The element bits of a float array, for bit-for-bit comparison."""
    return np.ascontiguousarray(array).view(BITS[array.dtype.itemsize]).reshape(-1).tolist()


def special_floats(dtype) -> np.ndarray:
    """NaNs with payloads and both signs, ±0.0, ±inf, subnormals, the extremes: as raw bits of the dtype."""
    width = np.dtype(dtype).itemsize * 8
    exponent_bits = {16: 5, 32: 8, 64: 11}[width] if dtype is not ml_dtypes.bfloat16 else 8
    mantissa = width - 1 - exponent_bits
    top = ((1 << exponent_bits) - 1) << mantissa
    sign = 1 << (width - 1)
    patterns = [0, sign, top, top | sign, top | 1, top | sign | 3, top | (1 << (mantissa - 1)) | 5 % (1 << mantissa),
                1, sign | 1, (1 << mantissa) - 1, top - 1, sign | (top - 1)]
    return np.array(patterns, dtype=BITS[width // 8]).view(dtype)


def test_every_dtype_round_trips_from_numpy_and_torch():
    for name, dtype in NUMPY_DTYPES.items():
        array = (np.arange(12) % 2).astype(dtype).reshape(3, 4) if name == "bool" else np.arange(-6, 6).astype(dtype).reshape(3, 4)
        got = travel({"x": array})["x"]
        assert got.dtype == np.dtype(dtype) and got.shape == (3, 4), name
        assert got.tobytes() == array.tobytes(), name
        assert not got.flags.writeable, "the judge's arrays are read-only"
        tensor = torch.arange(-6, 6).reshape(3, 4).to(TORCH_DTYPES[name])
        from_torch = travel([tensor])[0]
        assert from_torch.dtype == np.dtype(dtype) and from_torch.shape == (3, 4), name
        assert from_torch.tobytes() == got.tobytes() or name == "bool", name
    worker_side = travel(np.arange(4, dtype=np.int32), "input", writable=True)
    assert worker_side.flags.writeable
    worker_side[0] = 7  # a worker's input is its own to change


def test_special_floats_round_trip_bit_for_bit():
    for dtype in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64):
        array = special_floats(dtype)
        assert bits(travel(array)) == bits(array), dtype
    bf16 = torch.from_numpy(special_floats(ml_dtypes.bfloat16).view(np.int16).copy()).view(torch.bfloat16)
    got = travel(bf16)
    assert got.dtype == ml_dtypes.bfloat16 and bits(got) == bf16.view(torch.int16).numpy().view(np.uint16).tolist()
    f32 = torch.from_numpy(special_floats(np.float32).view(np.int32).copy()).view(torch.float32)
    assert bits(travel(f32)) == f32.view(torch.int32).numpy().view(np.uint32).tolist()


def test_a_frame_of_tensors_sets_the_buffers_flag_alone():
    """The exact-numbers flag stays for bodies that need it: a tensor's tag is no reason to parse numbers slowly."""
    word = int.from_bytes(frame({"v": encode([np.zeros(2, np.float32), torch.ones(1)])})[:4], "big")
    assert word & BUFFERS_FLAG and not word & EXACT_FLAG


def test_zero_d_and_empty_shapes():
    for array in (np.array(2.5, dtype=np.float32), np.zeros((0,), np.int64), np.zeros((3, 0, 2), np.float16),
                  np.array(True)):
        got = travel(array)
        assert got.shape == array.shape and got.dtype == array.dtype and got.tobytes() == array.tobytes()
    assert travel(torch.tensor(7, dtype=torch.int16)).shape == ()
    assert travel(torch.zeros(0, 5, dtype=torch.bfloat16)).shape == (0, 5)


def test_strided_transposed_and_big_endian_inputs_travel_in_c_order_little_endian():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for tensor in (base.t(), base[:, ::2], base[1:3].t(), base.expand(2, 4, 6), base.to(torch.bfloat16).t()):
        got = travel(tensor)
        assert got.shape == tuple(tensor.shape)
        expected = tensor.contiguous().view(torch.int16).numpy() if tensor.dtype == torch.bfloat16 else tensor.contiguous().numpy()
        assert got.tobytes() == expected.tobytes()
    grad = torch.ones(3, requires_grad=True) * 2
    assert travel(grad).tolist() == [2.0, 2.0, 2.0]
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    got = travel(big[:, ::-1])
    assert got.dtype == np.dtype("<i4") and got.tolist() == [[2, 1, 0], [5, 4, 3]]
    assert travel(np.array([1.5, -2.0], dtype=">f8")).tolist() == [1.5, -2.0]


def test_unsupported_dtypes_and_scalars_are_not_plain_naming_dtype_and_path():
    cases = [
        ({"t": torch.zeros(2, dtype=torch.complex64)}, 'torch.Tensor of dtype torch.complex64, which the protocol does not carry'),
        ([1, torch.zeros(2, dtype=torch.float8_e4m3fn)], "torch.Tensor of dtype torch.float8_e4m3fn"),
        ([torch.zeros(2, dtype=torch.uint16)], "torch.Tensor of dtype torch.uint16"),
        ((np.zeros(2, np.uint16),), "numpy.ndarray of dtype uint16"),
        ([np.zeros(2, ml_dtypes.float8_e4m3fn)], "numpy.ndarray of dtype float8_e4m3fn"),
        ([np.array(["a"])], "numpy.ndarray of dtype <U1"),
        ([torch.zeros(2, device="meta")], "torch.Tensor on device meta, which holds no data"),
        ([torch.zeros(2).to_sparse()], "with layout torch.sparse_coo"),
    ]
    paths = ['result["t"]', "result[1]", "result[0]", "result[0]", "result[0]", "result[0]", "result[0]", "result[0]"]
    for (value, message), path in zip(cases, paths):
        with pytest.raises(NotPlain) as refused:
            encode(value)
        assert message in str(refused.value) and str(refused.value).endswith(f" at {path}"), str(refused.value)
    for scalar, name in ((np.float32(1.0), "numpy.float32"), (np.int64(2), "numpy.int64"), (ml_dtypes.bfloat16(1), "bfloat16")):
        with pytest.raises(NotPlain, match=rf"{name} at result\[0\]$"):
            encode([scalar])  # scalars stay not plain, as in version 1
    with pytest.raises(NotPlain, match=r"numpy\.ma\.MaskedArray"):
        encode(np.ma.masked_array([1, 2], mask=[0, 1]))


def test_the_writer_refuses_past_the_cap_and_the_buffer_count():
    with pytest.raises(NotPlain) as one:
        encode({"w": np.zeros(300, np.float32)}, cap=1000)
    assert str(one.value) == ('result is not plain data: numpy.ndarray of 1200 bytes, past the cap of 1000 bytes per '
                              'message (max-tensor-bytes) at result["w"]')
    with pytest.raises(NotPlain) as summed:
        encode([np.zeros(100, np.float32), torch.zeros(200, dtype=torch.float32)], cap=1000)
    assert "torch.Tensor of 800 bytes (after 400 bytes of tensors before it), past the cap of 1000" in str(summed.value)
    assert str(summed.value).endswith("at result[1]")
    with pytest.raises(NotPlain) as counted:
        encode([np.zeros(1, np.int8)] * (MAX_BUFFERS + 1))
    assert f"(tensor {MAX_BUFFERS + 1} of this value, past the limit of {MAX_BUFFERS} per message) at result[{MAX_BUFFERS}]" in str(counted.value)
    assert len(travel([np.zeros(1, np.int8)] * MAX_BUFFERS)) == MAX_BUFFERS


def _refusal(data, buffers, root: str = "result", cap: int = 4 * 1024 ** 3) -> str:
    with pytest.raises(ProtocolError) as refused:
        decode(data, root, buffers=tuple(bytearray(b) for b in buffers), cap=cap)
    return str(refused.value)


def tensor(dtype="float32", shape=(2,), buffer=0, **extra):
    return {"$tensor": {"dtype": dtype, "shape": list(shape), "buffer": buffer, **extra}}


def test_every_refusal_of_the_contract_names_the_place():
    four = [bytes(8)]
    cases = [
        ([1, tensor("complex64")], four, "a $tensor of dtype 'complex64', which is not one of bool, uint8, int8, int16, "
                                         "int32, int64, float16, bfloat16, float32, float64 at result[1]"),
        (tensor(shape=(-1, 2)), four, "a $tensor of shape [-1, 2]: a shape is a list of ints >= 0 at result"),
        (tensor(shape=(2.0,)), four, "a $tensor of shape [2.0]: a shape is a list of ints >= 0"),
        (tensor(shape=(True,)), four, "a $tensor of shape [True]: a shape is a list of ints >= 0"),
        ({"$tensor": {"dtype": "int8", "shape": 3, "buffer": 0}}, four, "a $tensor of shape a number: a shape is a list"),
        (tensor(shape=(2 ** 64, 1)), four, "a dimension overflows a signed 64-bit int"),
        (tensor(shape=(2 ** 40, 2 ** 40)), four, "needs 4835703278458516698824704 bytes, past the cap of 4294967296 bytes"),
        (tensor(shape=[1] * 65), four, "65 dimensions, past the limit of 64"),
        (tensor(shape=(3,)), four, "a $tensor of shape [3] (float32) needs 12 bytes, but buffer 0 holds 8"),
        ([tensor(), tensor()], four, "a second $tensor of buffer 0: each buffer belongs to exactly one $tensor at result[1]"),
        ([tensor()], [bytes(8), bytes(1)], "the frame's buffer 1 is used by no $tensor (1 of its 2 buffers are unused)"),
        ([1, 2], [bytes(1)], "the frame's buffer 0 is used by no $tensor"),
        (tensor(buffer=1), four, "a $tensor of buffer 1, not an index below the frame's 1 buffers"),
        (tensor(buffer=True), four, "a $tensor of buffer True, not an index below"),
        (tensor("bool", (4,)), [b"\x00\x01\x02\x01"], "a bool $tensor whose element 2 is the byte 2: bool elements are 0 or 1"),
        ({"$map": [[tensor(), 1]]}, four, "a $tensor as a map key at result.<key 0>"),
        ({"$map": [["k", tensor(extra=1)]]}, four,
         "a $tensor with keys ['dtype', 'shape', 'buffer', 'extra'], not exactly dtype, shape and buffer at result[\"k\"]"),
        ({"$tensor": {"dtype": "int8", "shape": [1]}}, four, "not exactly dtype, shape and buffer"),
        ({"$tensor": [1]}, four, "$tensor of an array, not an object"),
        (tensor(), [], "a $tensor, but the frame carries no buffers at result"),
    ]
    for data, buffers, message in cases:
        assert message in _refusal(data, buffers), (message, _refusal(data, buffers))
    assert "past the cap of 7 bytes" in _refusal(tensor(), four, cap=7)
    assert _refusal(tensor(shape=(-1,)), four, root="input").startswith("input is not plain data: ")


def test_strict_equal_on_tensors_is_dtype_shape_and_bits():
    a = np.array([1.0, np.nan, -0.0], np.float32)
    assert strict_equal(travel(a), a.copy())
    assert not strict_equal(a, np.array([1.0, np.nan, 0.0], np.float32)), "-0.0 differs from 0.0"
    other_nan = a.copy()
    other_nan.view(np.uint32)[1] |= 1
    assert not strict_equal(a, other_nan), "a NaN equals only the same NaN bits"
    assert not strict_equal(a, a.astype(np.float64)), "dtype"
    assert not strict_equal(a, a.reshape(3, 1)), "shape"
    assert not strict_equal(np.array([1, 2]), [1, 2]) and not strict_equal([1, 2], np.array([1, 2])), "a tensor never equals a list"
    assert not strict_equal(np.array([1, 2], np.int32), (1, 2))
    assert strict_equal(np.arange(3, dtype=">i4"), np.arange(3, dtype="<i4")), "byte order is the wire's, not the value's"
    assert strict_equal({"t": [np.zeros(2, ml_dtypes.bfloat16)]}, {"t": [np.zeros(2, ml_dtypes.bfloat16)]})
    assert not strict_equal(np.zeros(2, ml_dtypes.bfloat16), np.zeros(2, np.float16))
    big = np.zeros(5 * (1 << 22), np.float32)  # past one compared chunk
    changed = big.copy()
    changed[-1] = 1.0
    assert strict_equal(big, big.copy()) and not strict_equal(big, changed)


def test_a_report_shows_a_tensor_compactly_in_bounded_time():
    shown = render_value({"out": np.arange(10, dtype=np.float32).reshape(2, 5), "n": 3})
    assert shown == "{'out': tensor(float32, shape [2, 5], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, ... 4 more]), 'n': 3}"
    assert render_value(np.array(True)) == "tensor(bool, shape [], [True])"
    assert render_value(np.zeros((0, 3), ml_dtypes.bfloat16)) == "tensor(bfloat16, shape [0, 3], [])"
    assert render_value([np.array([1.5, np.nan], ml_dtypes.bfloat16)]) == "[tensor(bfloat16, shape [2], [1.5, nan])]"
    huge = np.broadcast_to(np.float32(0.5), (10 ** 6, 10 ** 6))  # 10^12 elements, no memory: strides of 0
    start = time.perf_counter()
    text = render_value({"huge": huge})
    assert time.perf_counter() - start < 1.0
    assert text == "{'huge': tensor(float32, shape [1000000, 1000000], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, ... 999999999994 more])}"


def test_as_torch_gives_the_same_bits_bfloat16_included():
    import vllm_gates

    bf16 = special_floats(ml_dtypes.bfloat16)
    got = vllm_gates.as_torch(travel(bf16, "input", writable=True))
    assert got.dtype == torch.bfloat16 and got.view(torch.int16).numpy().view(np.uint16).tolist() == bits(bf16)
    read_only = travel(np.arange(6, dtype=np.int64).reshape(2, 3))
    converted = vllm_gates.as_torch(read_only)
    assert converted.dtype == torch.int64 and converted.tolist() == [[0, 1, 2], [3, 4, 5]]
    converted[0, 0] = 9  # a copy: the judge's read-only array is untouched
    assert read_only[0, 0] == 0
    assert vllm_gates.as_torch(np.arange(3, dtype=">f4")).tolist() == [0.0, 1.0, 2.0]
    assert vllm_gates.as_torch(np.array(True)).shape == ()
    with pytest.raises(TypeError, match="as_torch takes a numpy.ndarray .a tensor input., got builtins.list"):
        vllm_gates.as_torch([1, 2])


def test_plain_values_without_tensors_import_no_numpy():
    """`import _vllm_gates.wire.plain` and frames of plain data stay cheap: numpy loads only for a tensor."""
    code = ("import sys, socket\nfrom _vllm_gates.wire import plain, channel; from _vllm_gates.values import compare, render\n"
            "l, r = socket.socketpair()\nchannel.send(l, {'v': plain.encode({'a': [1, 2.5, (3,)]})})\n"
            "got = channel.receive_buffered(r, 5)\nv = plain.decode(channel.parse(got.body, got.exact)['v'])\n"
            "assert compare.strict_equal(v, {'a': [1, 2.5, (3,)]}) and render.render_value(v)\n"
            "assert 'numpy' not in sys.modules and 'ml_dtypes' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_bool_array_viewed_from_other_bytes_is_sent_as_zeros_and_ones():
    """numpy lets a bool array hold any byte (a view of uint8); the wire allows 0 and 1 only, so the writer sends
    what the array means (nonzero is True), never a byte the reader must refuse."""
    odd = np.array([0, 2, 1, 255], np.uint8).view(np.bool_)
    got = travel(odd)
    assert got.dtype == np.bool_ and got.tolist() == [False, True, True, True]
    assert np.frombuffer(got.tobytes(), np.uint8).tolist() == [0, 1, 1, 1]

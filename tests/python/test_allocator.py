"""ddphooks.DeviceAllocator (ABI 1.3): the C table calls the Python
callables with the right arguments, the session validates and takes it, CPU
buckets never touch it, and ddphooks.torch.caching_allocator() maps onto
PyTorch's caching allocator. (No GPU here: the GPU path that draws scratch
from a lent allocator is tested in C++, HooksOnCudaOverGloo.)"""
import ctypes
import logging

import pytest

np = pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)
from ddphooks import _abi  # noqa: E402

CUDA3 = _abi.DLDevice(_abi.kDLCUDA, 3)


class Recorder:
    def __init__(self, address=0x7000):
        self.address, self.allocs, self.frees = address, [], []

    def alloc(self, nbytes, device, stream):
        self.allocs.append((nbytes, device, stream))
        return self.address

    def free(self, ptr, device, stream):
        self.frees.append((ptr, device, stream))


def test_the_c_table_calls_the_python_callables():
    rec = Recorder()
    a = ddphooks.DeviceAllocator(rec.alloc, rec.free)
    t = a.table
    assert t.struct_size == ctypes.sizeof(_abi.DeviceAllocator)
    assert t.alloc(None, 4096, CUDA3, ctypes.c_void_p(0xabc0)) == 0x7000
    assert t.alloc(None, 8, CUDA3, None) == 0x7000  # NULL: the legacy default stream
    assert rec.allocs == [(4096, 3, 0xabc0), (8, 3, 0)]
    t.free(None, ctypes.c_void_p(0x7000), CUDA3, ctypes.c_void_p(0xabc0))
    assert rec.frees == [(0x7000, 3, 0xabc0)]


def test_a_failing_alloc_returns_null_and_never_raises_into_c(caplog):
    def boom(nbytes, device, stream):
        raise MemoryError("pool exhausted")

    def boom_free(ptr, device, stream):
        raise RuntimeError("double free")

    t = ddphooks.DeviceAllocator(boom, boom_free).table
    with caplog.at_level(logging.ERROR, logger="ddphooks"):
        assert t.alloc(None, 64, CUDA3, None) is None  # NULL: DDPH_OUT_OF_MEMORY
        t.free(None, ctypes.c_void_p(0x10), CUDA3, None)
    assert "alloc(64) failed" in caplog.text and "pool exhausted" in caplog.text
    assert "double free" in caplog.text
    zero = ddphooks.DeviceAllocator(lambda n, d, s: 0, lambda p, d, s: None).table
    assert zero.alloc(None, 64, CUDA3, None) is None


def open_solo(tmp_path, allocator):
    return ddphooks.Session({"hook": {"family": "default", "name": "allreduce"}}, rank=0,
                            world_size=1, rendezvous="file://" + str(tmp_path / "store"),
                            device_allocator=allocator)


def test_the_session_takes_it_and_cpu_buckets_never_call_it(tmp_path):
    rec = Recorder()
    with open_solo(tmp_path, ddphooks.DeviceAllocator(rec.alloc, rec.free)) as s:
        a = np.arange(1000, dtype=np.float32)
        s.run(a)
        np.testing.assert_array_equal(a, np.arange(1000, dtype=np.float32))
    assert rec.allocs == [] and rec.frees == []


def test_the_session_validates_the_table_it_is_given(tmp_path):
    # The C side checks what reaches it: a table with a bad size is refused
    # by name, which also shows the pointer is passed through.
    rec = Recorder()
    bad = ddphooks.DeviceAllocator(rec.alloc, rec.free)
    bad.table.struct_size = 3
    with pytest.raises(ddphooks.DDPHError) as e:
        open_solo(tmp_path, bad)
    assert e.value.code == ddphooks.Code.INVALID_ARGUMENT
    assert "device_allocator" in str(e.value)


def test_torch_caching_allocator_maps_onto_torchs_raw_alloc_and_delete(monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch (Debian python3-torch) is not installed")
    import ddphooks.torch as dt

    calls = []
    monkeypatch.setattr(torch.cuda, "caching_allocator_alloc",
                        lambda size, device=None, stream=None:
                        calls.append(("alloc", size, device, stream)) or 0x5000)
    monkeypatch.setattr(torch.cuda, "caching_allocator_delete",
                        lambda ptr: calls.append(("delete", ptr)))
    t = dt.caching_allocator().table
    assert t.alloc(None, 1 << 20, CUDA3, ctypes.c_void_p(0x99)) == 0x5000
    assert t.alloc(None, 16, CUDA3, None) == 0x5000
    t.free(None, ctypes.c_void_p(0x5000), CUDA3, ctypes.c_void_p(0x99))
    # Stream 0 (never None) keeps the legacy default stream rather than
    # PyTorch's current one.
    assert calls == [("alloc", 1 << 20, 3, 0x99), ("alloc", 16, 3, 0), ("delete", 0x5000)]

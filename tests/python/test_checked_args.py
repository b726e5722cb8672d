"""Every integer and string the package hands libddph.so is checked first:
one that does not fit its C type (ctypes would wrap it), a bool where an int
is meant, or a string with a NUL (C would cut it there) is refused with the
argument's name, before anything reaches the library."""
import pytest

np = pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

import ddphooks  # noqa: E402  (conftest puts python/ on sys.path)
from ddphooks import _abi  # noqa: E402

ALLREDUCE = {"hook": {"family": "default", "name": "allreduce"}}


@pytest.mark.parametrize("world_size, error", [
    (2 ** 31, OverflowError), (2 ** 40, OverflowError), (-5, ValueError),
    (0, ddphooks.DDPHError),
    (True, TypeError), (2.0, TypeError)])
def test_world_size_that_c_would_wrap_is_refused(world_size, error):
    with pytest.raises(error, match="world_size"):
        ddphooks.Session(ALLREDUCE, rank=0, world_size=world_size)


@pytest.mark.parametrize("rank, error", [(2 ** 31, OverflowError), (-2, ValueError),
                                         (3, ddphooks.DDPHError)])
def test_rank_that_c_would_wrap_or_misread_is_refused(rank, error):
    with pytest.raises(error, match="rank"):
        ddphooks.Session(ALLREDUCE, rank=rank, world_size=2)


def test_a_nul_in_a_string_is_refused_not_cut(tmp_path):
    url = "file://" + str(tmp_path / "store")
    with pytest.raises(ValueError, match="rendezvous contains a NUL"):
        ddphooks.Session(ALLREDUCE, rank=0, world_size=1, rendezvous=url + "\0/other")
    with pytest.raises(ValueError, match="job contains a NUL"):
        ddphooks.Session(ALLREDUCE, rank=0, world_size=1, job="a\0b")
    with pytest.raises(ValueError, match="config contains a NUL"):
        ddphooks.Session("hook: {family: default, name: allreduce}\n\0garbage: [", rank=0,
                         world_size=1)


def test_the_library_itself_refuses_a_negative_world_size_other_than_unset():
    """A C host (or a wrapped integer) gets the same answer from ddph_session_open."""
    import ctypes
    lib = ddphooks._library.load()
    opts = _abi.new(_abi.SessionOptions, yaml_text=b"hook: {family: default, name: allreduce}",
                    rank=0, world_size=-5)
    handle = ctypes.c_void_p()
    with pytest.raises(ddphooks.DDPHError, match="world_size is -5"):
        ddphooks.errors.check(lib, lib.ddph_session_open(ctypes.byref(opts), ctypes.byref(handle)))
    assert not handle


@pytest.mark.parametrize("kwargs, name", [
    ({"index": 2 ** 64}, "index"), ({"index": -1}, "index"), ({"step": 2 ** 64}, "step"),
    ({"step": -1}, "step"), ({"index": True}, "index"),
    ({"params": [(4,)], "param_ids": [2 ** 64]}, r"param_ids\[0\]"),
    ({"params": [(4,)], "param_ids": [2 ** 63]}, r"param_ids\[0\]"),
    ({"params": [(2 ** 64,)]}, r"params\[0\]'s shape\[0\]"),
    ({"params": [(-1,)]}, r"params\[0\]'s shape\[0\]"),
    ({"stream": 2 ** 64}, "stream")])
def test_run_refuses_what_c_would_wrap_and_the_bucket_is_untouched(kwargs, name):
    with ddphooks.Session(ALLREDUCE, rank=0, world_size=1) as s:
        a = np.arange(4, dtype=np.float32)
        with pytest.raises((OverflowError, ValueError, TypeError), match=name):
            s.run(a, **kwargs)
        np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))
        # The session is untouched: the next correct call works and counts one step.
        s.run(a)
        assert s.stats()["steps"] == 1


def test_the_largest_values_that_fit_go_through():
    with ddphooks.Session(ALLREDUCE, rank=0, world_size=1) as s:
        a = np.arange(4, dtype=np.float32)
        s.run(a, index=0, step=2 ** 64 - 1, params=[(4,)], param_ids=[2 ** 63 - 1])
        np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))


def test_checked_int_names_the_argument_and_the_range():
    with pytest.raises(OverflowError, match=r"x = 4294967296 does not fit in int32_t "
                                            r"\(-2147483648 to 2147483647\)"):
        _abi.checked_int(2 ** 32, "x", _abi.INT32)
    assert _abi.checked_int(np.int64(7), "x", _abi.INT32) == 7
    with pytest.raises(TypeError, match="x must be an integer, not float"):
        _abi.checked_int(1.5, "x", _abi.INT32)

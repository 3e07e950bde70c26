"""Loading libkdtree_kernels_c and declaring its C functions.

One declarative table (after vLLM's pynccl_wrapper.py): every exported function
with its C prototype as a comment; argtypes/restype are set from the table and
every function returning kdtree_status gets an errcheck that raises the
matching KDTreeError with the library's thread-local message.
"""

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Any, List

from . import _structs as s
from .errors import error_for

LIBRARY_NAME = "libkdtree_kernels_c.so"
ENV_LIBRARY = "KDTREE_KERNELS_LIB"

# A marker, not a ctypes type: functions returning kdtree_status get restype
# c_int32 plus the raising errcheck (int32_t getters must not).
_status = "kdtree_status"
_vp = ctypes.c_void_p
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_size_p = ctypes.POINTER(ctypes.c_size_t)
_i32_p = ctypes.POINTER(ctypes.c_int32)
_i64_p = ctypes.POINTER(ctypes.c_int64)


@dataclass
class Function:
    name: str
    restype: Any
    argtypes: List[Any]


def _p(struct):
    return ctypes.POINTER(struct)


# fmt: off
exported_functions = [
    # int32_t kdtree_version_number(void);
    Function("kdtree_version_number", _i32, []),
    # const char* kdtree_version_string(void);
    Function("kdtree_version_string", ctypes.c_char_p, []),
    # int32_t kdtree_abi_version(void);
    Function("kdtree_abi_version", _i32, []),
    # const char* kdtree_status_string(kdtree_status status);
    Function("kdtree_status_string", ctypes.c_char_p, [_i32]),
    # const char* kdtree_last_error_message(void);
    Function("kdtree_last_error_message", ctypes.c_char_p, []),
    # const char* kdtree_build_info(void);
    Function("kdtree_build_info", ctypes.c_char_p, []),
    # kdtree_status kdtree_struct_size(const char* struct_name, size_t* size);
    Function("kdtree_struct_size", _status, [ctypes.c_char_p, _size_p]),

    # kdtree_status kdtree_prepare(int32_t device);
    Function("kdtree_prepare", _status, [_i32]),
    # kdtree_status kdtree_device_supported(int32_t device, int32_t* ok);
    Function("kdtree_device_supported", _status, [_i32, _i32_p]),

    # kdtree_status kdtree_verify_paged_params_init(kdtree_verify_paged_params* params);
    Function("kdtree_verify_paged_params_init", _status, [_p(s.VerifyPagedParams)]),
    # kdtree_status kdtree_verify_workspace_size(const kdtree_verify_paged_params* params,
    #                                            size_t* workspace_bytes);
    Function("kdtree_verify_workspace_size", _status, [_p(s.VerifyPagedParams), _size_p]),
    # kdtree_status kdtree_verify_paged(const kdtree_verify_paged_params* params,
    #                                   void* workspace, size_t workspace_bytes,
    #                                   kdtree_stream_t stream);
    Function("kdtree_verify_paged", _status,
             [_p(s.VerifyPagedParams), _vp, ctypes.c_size_t, _vp]),
    # kdtree_status kdtree_verify_paged_reference(const kdtree_verify_paged_params* params,
    #                                             kdtree_stream_t stream);
    Function("kdtree_verify_paged_reference", _status, [_p(s.VerifyPagedParams), _vp]),
    # kdtree_status kdtree_verify_paged_host(const kdtree_verify_paged_params* params);
    Function("kdtree_verify_paged_host", _status, [_p(s.VerifyPagedParams)]),

    # kdtree_status kdtree_verify_contiguous_params_init(kdtree_verify_contiguous_params* params);
    Function("kdtree_verify_contiguous_params_init", _status, [_p(s.VerifyContiguousParams)]),
    # kdtree_status kdtree_verify_contiguous(const kdtree_verify_contiguous_params* params,
    #                                        kdtree_stream_t stream);
    Function("kdtree_verify_contiguous", _status, [_p(s.VerifyContiguousParams), _vp]),

    # kdtree_status kdtree_merge_params_init(kdtree_merge_params* params);
    Function("kdtree_merge_params_init", _status, [_p(s.MergeParams)]),
    # kdtree_status kdtree_merge_attention_states(const kdtree_merge_params* params,
    #                                             kdtree_stream_t stream);
    Function("kdtree_merge_attention_states", _status, [_p(s.MergeParams), _vp]),
    # kdtree_status kdtree_merge_attention_states_host(const kdtree_merge_params* params);
    Function("kdtree_merge_attention_states_host", _status, [_p(s.MergeParams)]),

    # kdtree_status kdtree_defrag_copy_params_init(kdtree_defrag_copy_params* params);
    Function("kdtree_defrag_copy_params_init", _status, [_p(s.DefragCopyParams)]),
    # kdtree_status kdtree_defrag_copy(const kdtree_defrag_copy_params* params,
    #                                  kdtree_stream_t stream);
    Function("kdtree_defrag_copy", _status, [_p(s.DefragCopyParams), _vp]),
    # kdtree_status kdtree_defrag_remap_params_init(kdtree_defrag_remap_params* params);
    Function("kdtree_defrag_remap_params_init", _status, [_p(s.DefragRemapParams)]),
    # kdtree_status kdtree_defrag_remap_workspace_size(const kdtree_defrag_remap_params* params,
    #                                                  size_t* workspace_bytes);
    Function("kdtree_defrag_remap_workspace_size", _status, [_p(s.DefragRemapParams), _size_p]),
    # kdtree_status kdtree_defrag_remap(const kdtree_defrag_remap_params* params,
    #                                   void* workspace, size_t workspace_bytes,
    #                                   kdtree_stream_t stream);
    Function("kdtree_defrag_remap", _status,
             [_p(s.DefragRemapParams), _vp, ctypes.c_size_t, _vp]),
    # kdtree_status kdtree_defrag_plan_params_init(kdtree_defrag_plan_params* params);
    Function("kdtree_defrag_plan_params_init", _status, [_p(s.DefragPlanParams)]),
    # kdtree_status kdtree_defrag_plan(const kdtree_defrag_plan_params* params);
    Function("kdtree_defrag_plan", _status, [_p(s.DefragPlanParams)]),
    # kdtree_status kdtree_fragmentation_stats_compute(const kdtree_defrag_plan_params* plan_params,
    #                                                  int64_t* runs_per_request,
    #                                                  kdtree_fragmentation_stats* stats);
    Function("kdtree_fragmentation_stats_compute", _status,
             [_p(s.DefragPlanParams), _i64_p, _p(s.FragmentationStats)]),
    # kdtree_status kdtree_sort_slots_workspace_size(int32_t index_dtype, int64_t count,
    #                                                int64_t num_slots, size_t* workspace_bytes);
    Function("kdtree_sort_slots_workspace_size", _status, [_i32, _i64, _i64, _size_p]),
    # kdtree_status kdtree_sort_slots(void* slots, int32_t index_dtype, int64_t count,
    #                                 int64_t num_slots, void* workspace,
    #                                 size_t workspace_bytes, kdtree_stream_t stream);
    Function("kdtree_sort_slots", _status,
             [_vp, _i32, _i64, _i64, _vp, ctypes.c_size_t, _vp]),
]
# fmt: on


def _candidate_paths():
    """Where the library is looked for, in order (see README "Bindings")."""
    env = os.environ.get(ENV_LIBRARY)
    if env:
        # An explicit path is the only candidate: silently falling back to a
        # different build would hide a misconfiguration.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, LIBRARY_NAME + "*")))
    repo = os.path.abspath(os.path.join(here, "..", "..", ".."))
    build_tree = os.path.join(repo, "build", LIBRARY_NAME)
    if os.path.exists(build_tree):
        paths.append(build_tree)
    paths.append(LIBRARY_NAME)  # the system loader (LD_LIBRARY_PATH, ldconfig)
    return paths


def _load(path=None):
    errors = []
    for candidate in [path] if path else _candidate_paths():
        try:
            return ctypes.CDLL(candidate), candidate
        except OSError as e:
            errors.append(f"  {candidate}: {e}")
    raise ImportError(
        "kdtree_kernels: cannot load " + LIBRARY_NAME + " (set " + ENV_LIBRARY
        + " to its path). Tried:\n" + "\n".join(errors))


class Library:
    """The loaded library: each C function is an attribute (``lib.kdtree_verify_paged``)."""

    def __init__(self, cdll, path):
        self._cdll = cdll
        self.path = path
        for f in exported_functions:
            try:
                fn = getattr(cdll, f.name)
            except AttributeError:
                raise ImportError(
                    f"kdtree_kernels: {path} does not export {f.name}; "
                    "the library is older than these bindings") from None
            fn.argtypes = f.argtypes
            if f.restype == _status:
                fn.restype = ctypes.c_int32
                fn.errcheck = self._errcheck
            else:
                fn.restype = f.restype
            setattr(self, f.name, fn)

    def _errcheck(self, result, func, args):
        if result != s.OK:
            message = self._cdll.kdtree_last_error_message()
            raise error_for(result, message.decode() if message else "", func.__name__)
        return result

    def last_error_message(self):
        return self.kdtree_last_error_message().decode()


def _check_structs(library):
    size = ctypes.c_size_t()
    for c_name, mirror in s.STRUCTS.items():
        library.kdtree_struct_size(c_name.encode(), ctypes.byref(size))
        if size.value != ctypes.sizeof(mirror):
            raise ImportError(
                f"kdtree_kernels: struct {c_name} is {size.value} bytes in "
                f"{library.path} but {ctypes.sizeof(mirror)} in the Python mirror "
                f"({mirror.__name__}); the bindings and the library disagree")


def load(path=None):
    """A checked handle on the library at `path`, else on the first candidate
    of _candidate_paths(). The package's functions use `lib` below; a caller
    that wants a second build side by side (the benchmark comparing the sm_90a
    and portable kernels) takes its own handle here and calls its functions.
    Two different files stay independent in one process: ctypes opens each
    RTLD_LOCAL, and only kdtree_* leave the library (static cudart inside), so
    they share no symbols or state. The same path twice gives one dlopen handle.
    """
    cdll, path = _load(path)
    library = Library(cdll, path)
    abi = library.kdtree_abi_version()
    if abi != s.ABI_VERSION:
        raise ImportError(
            f"kdtree_kernels: {path} has ABI version {abi}, these bindings "
            f"were written for {s.ABI_VERSION}")
    _check_structs(library)
    return library


lib = load()

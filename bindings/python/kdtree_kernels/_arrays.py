"""Turning caller arrays into (pointer, dtype, shape, strides, device) views.

Device arguments may be raw integer pointers (nothing can be checked, the
caller supplies dtypes/sizes), PyTorch tensors, or any object exposing
``__cuda_array_interface__`` (CuPy, Numba, ...). Host arguments are objects
exposing ``__array_interface__`` (NumPy). Strides are reported in elements.
Nothing here imports torch/cupy/numpy: a torch tensor is recognised by its
type's module, so the package works without them.
"""

import sys
from dataclasses import dataclass
from typing import Optional, Tuple

from . import _structs as s

# dtype name -> (kdtree dtype code or None, itemsize)
_DTYPES = {
    "float32": (s.DTYPE_F32, 4),
    "bfloat16": (s.DTYPE_BF16, 2),
    "float16": (s.DTYPE_F16, 2),
    "float8_e4m3fn": (s.DTYPE_FP8_E4M3, 1),
    "int32": (s.DTYPE_INT32, 4),
    "int64": (s.DTYPE_INT64, 8),
    "uint8": (None, 1),
    "uint16": (None, 2),  # raw bf16 bits from NumPy without ml_dtypes
    "uint64": (None, 8),
    "float64": (None, 8),
    "bool": (None, 1),
}
_TYPESTR = {"f4": "float32", "f2": "float16", "i4": "int32", "i8": "int64",
            "u1": "uint8", "u2": "uint16", "u8": "uint64", "f8": "float64",
            "b1": "bool"}
_CODE_NAMES = {s.DTYPE_F32: "float32", s.DTYPE_BF16: "bfloat16", s.DTYPE_F16: "float16",
               s.DTYPE_FP8_E4M3: "float8_e4m3fn", s.DTYPE_INT32: "int32",
               s.DTYPE_INT64: "int64"}
_CODE_SIZES = {s.DTYPE_F32: 4, s.DTYPE_BF16: 2, s.DTYPE_F16: 2, s.DTYPE_FP8_E4M3: 1,
               s.DTYPE_INT32: 4, s.DTYPE_INT64: 8}


def itemsize(dtype):
    """Bytes per element of a View dtype name."""
    return _DTYPES[dtype][1]


def torch_dtype_name(dtype):
    """The _DTYPES key of a torch dtype (torch.bfloat16 -> "bfloat16")."""
    return str(dtype).replace("torch.", "")


def torch_dtype_code(dtype):
    """The library's dtype code of a torch dtype (None where it has none)."""
    return _DTYPES.get(torch_dtype_name(dtype), (None, 0))[0]


def dtype_name(code):
    return _CODE_NAMES.get(code, f"dtype {code}")


@dataclass
class View:
    name: str                       # the argument's name, for messages
    ptr: int
    dtype: Optional[str] = None     # a key of _DTYPES, None for raw pointers
    shape: Optional[Tuple[int, ...]] = None
    strides: Optional[Tuple[int, ...]] = None  # elements
    device: Optional[int] = None    # CUDA ordinal, -1 for host, None unknown
    torch: bool = False             # a torch tensor (for the stream default)
    cupy: bool = False
    obj: object = None

    @property
    def checked(self):
        return self.dtype is not None

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _elem_strides(name, byte_strides, shape, itemsize):
    if byte_strides is None:  # C-contiguous
        out, acc = [], 1
        for d in reversed(shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))
    for b in byte_strides:
        if b % itemsize:
            raise ValueError(f"{name}: stride of {b} bytes is not a multiple of the "
                             f"element size {itemsize}")
    return tuple(b // itemsize for b in byte_strides)


def _from_interface(name, obj, iface, device):
    typestr = iface["typestr"]
    key = _TYPESTR.get(typestr[1:])
    if key is None:
        descr = getattr(getattr(obj, "dtype", None), "name", None)
        key = descr if descr in _DTYPES else None
    if key is None:
        raise TypeError(f"{name}: unsupported element type {typestr!r}")
    shape = tuple(int(d) for d in iface["shape"])
    strides = _elem_strides(name, iface.get("strides"), shape, _DTYPES[key][1])
    ptr = iface["data"][0] or 0
    return View(name, int(ptr), key, shape, strides, device, obj=obj)


def device_view(name, obj, required=True):
    """A View of a device argument (None allowed when not required)."""
    if obj is None:
        if required:
            raise ValueError(f"{name} is required")
        return None
    if isinstance(obj, bool):
        raise TypeError(f"{name}: expected a device array or an integer pointer, got bool")
    if isinstance(obj, int):
        return View(name, obj)
    if _is_torch_tensor(obj):
        if not obj.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor, got one on {obj.device}")
        key = torch_dtype_name(obj.dtype)
        if key not in _DTYPES:
            raise TypeError(f"{name}: unsupported dtype {obj.dtype}")
        return View(name, int(obj.data_ptr()), key, tuple(obj.shape), tuple(obj.stride()),
                    obj.device.index, torch=True, obj=obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        dev = getattr(obj, "device", None)
        dev = getattr(dev, "id", None)
        v = _from_interface(name, obj, iface, dev)
        v.cupy = type(obj).__module__.startswith("cupy")
        return v
    if hasattr(obj, "__array_interface__"):
        raise ValueError(f"{name}: expected device memory, got a host array "
                         f"({type(obj).__name__}); use the *_host function")
    raise TypeError(f"{name}: expected an integer device pointer, a torch CUDA tensor or an "
                    f"object with __cuda_array_interface__, got {type(obj).__name__}")


def host_view(name, obj, required=True, writable=False):
    """A View of a host argument (objects with __array_interface__)."""
    if obj is None:
        if required:
            raise ValueError(f"{name} is required")
        return None
    if _is_torch_tensor(obj) and obj.is_cuda:
        raise ValueError(f"{name}: expected a host array, got a CUDA tensor")
    iface = getattr(obj, "__array_interface__", None)
    if iface is None:
        raise TypeError(f"{name}: expected a host array (NumPy), got {type(obj).__name__}")
    if writable and iface["data"][1]:
        raise ValueError(f"{name}: the array is read-only but the library writes it")
    return _from_interface(name, obj, iface, -1)


def dtype_code(view, allowed, override=None):
    """The kdtree dtype of `view`, checked against `allowed` (codes).

    `override` names the dtype explicitly: needed for raw pointers and for raw
    bit containers (uint16 holding bf16, uint8 holding fp8) of the same size.
    """
    if override is not None:
        if override not in allowed:
            raise TypeError(f"{view.name}: dtype {dtype_name(override)} is not one of "
                            f"{', '.join(dtype_name(c) for c in allowed)}")
        if view.checked and _DTYPES[view.dtype][1] != _CODE_SIZES[override]:
            raise TypeError(f"{view.name}: {view.dtype} elements cannot hold "
                            f"{dtype_name(override)}")
        return override
    if not view.checked:
        raise ValueError(f"{view.name}: a raw pointer needs its dtype given explicitly")
    code = _DTYPES[view.dtype][0]
    if code not in allowed:
        raise TypeError(f"{view.name}: dtype {view.dtype} is not one of "
                        f"{', '.join(dtype_name(c) for c in allowed)}")
    return code


def check_raw(view, dtypes):
    """Checks a byte/index array whose dtype is fixed by the ABI (e.g. uint8 mask)."""
    if view is not None and view.checked and view.dtype not in dtypes:
        raise TypeError(f"{view.name}: expected dtype {' or '.join(dtypes)}, got {view.dtype}")


def check_ndim(view, ndim):
    if view is not None and view.checked and len(view.shape) != ndim:
        raise ValueError(f"{view.name}: expected {ndim} dimensions, got shape {view.shape}")


def check_same_device(views):
    devices = {v.device for v in views if v is not None and v.device is not None}
    if len(devices) > 1:
        named = ", ".join(f"{v.name} on cuda:{v.device}" for v in views
                          if v is not None and v.device is not None)
        raise ValueError(f"arguments are on different devices: {named}")
    return devices.pop() if devices else None


def stream_handle(stream, views):
    """The cudaStream_t to pass (an int).

    An int is a handle; an object with .cuda_stream (torch.cuda.Stream) or .ptr
    (cupy Stream) is unwrapped. None means the array library's current stream:
    torch.cuda.current_stream(device) for torch tensors, cupy's current stream
    for CuPy arrays, else the legacy default stream (0).
    """
    if stream is None:
        views = [v for v in views if v is not None]
        if any(v.torch for v in views):
            torch = sys.modules["torch"]
            device = check_same_device(views)
            return int(torch.cuda.current_stream(device).cuda_stream)
        if any(v.cupy for v in views):
            cupy = sys.modules["cupy"]
            return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise TypeError(f"stream: expected an int handle or a stream object, "
                    f"got {type(stream).__name__}")


def ptr(view):
    return None if view is None else (view.ptr or None)

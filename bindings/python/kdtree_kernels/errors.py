"""Exceptions carrying a kdtree_status and the library's own message."""

from . import _structs as s


class KDTreeError(Exception):
    """A call into libkdtree_kernels_c failed.

    ``status`` is the kdtree_status value, ``message`` the library's
    thread-local kdtree_last_error_message() captured right after the call
    (it names the function, the argument and the reason).
    """

    status = None

    def __init__(self, status, message, function=None):
        self.status = int(status)
        self.message = message
        self.function = function
        super().__init__(f"{message} [{status_name(self.status)}]" if message
                         else f"{function}: {status_name(self.status)}")


class InvalidArgumentError(KDTreeError):
    pass


class UnsupportedError(KDTreeError):
    pass


class MisalignedError(KDTreeError):
    pass


class WorkspaceTooSmallError(KDTreeError):
    pass


class StructVersionError(KDTreeError):
    pass


class NoDeviceError(KDTreeError):
    pass


class ArchNotBuiltError(KDTreeError):
    pass


class CudaError(KDTreeError):
    pass


class InternalError(KDTreeError):
    pass


ERROR_CLASSES = {
    s.ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    s.ERROR_UNSUPPORTED: UnsupportedError,
    s.ERROR_MISALIGNED: MisalignedError,
    s.ERROR_WORKSPACE_TOO_SMALL: WorkspaceTooSmallError,
    s.ERROR_STRUCT_VERSION: StructVersionError,
    s.ERROR_NO_DEVICE: NoDeviceError,
    s.ERROR_ARCH_NOT_BUILT: ArchNotBuiltError,
    s.ERROR_CUDA: CudaError,
    s.ERROR_INTERNAL: InternalError,
}

_STATUS_NAMES = {
    s.OK: "KDTREE_OK",
    s.ERROR_INVALID_ARGUMENT: "KDTREE_ERROR_INVALID_ARGUMENT",
    s.ERROR_UNSUPPORTED: "KDTREE_ERROR_UNSUPPORTED",
    s.ERROR_MISALIGNED: "KDTREE_ERROR_MISALIGNED",
    s.ERROR_WORKSPACE_TOO_SMALL: "KDTREE_ERROR_WORKSPACE_TOO_SMALL",
    s.ERROR_STRUCT_VERSION: "KDTREE_ERROR_STRUCT_VERSION",
    s.ERROR_NO_DEVICE: "KDTREE_ERROR_NO_DEVICE",
    s.ERROR_ARCH_NOT_BUILT: "KDTREE_ERROR_ARCH_NOT_BUILT",
    s.ERROR_CUDA: "KDTREE_ERROR_CUDA",
    s.ERROR_INTERNAL: "KDTREE_ERROR_INTERNAL",
}


def status_name(status):
    """The header's name of a status (Python-side table, no library call)."""
    return _STATUS_NAMES.get(int(status), "KDTREE_STATUS_UNKNOWN")


def error_for(status, message, function=None):
    """The KDTreeError subclass instance for a non-zero status."""
    cls = ERROR_CLASSES.get(int(status), KDTreeError)
    return cls(status, message, function)

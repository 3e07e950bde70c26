"""Python bindings of libkdtree_kernels_c: tree-verify attention for MLA models,
the merge of attention states, and KV-cache defragmentation.

Thin by design: ctypes over the C ABI (include/kdtree_kernels.h), which does
the work and the validation. Failures raise KDTreeError subclasses carrying the
library's message. The library is found through $KDTREE_KERNELS_LIB, next to
this package, in <repo>/build, or by the system loader.

Power users can fill the Structures themselves and call ``lib.<c function>``
directly (every function returning a status raises on failure);
``load_library(path)`` gives such a handle on another build of the library,
side by side with ``lib``.
"""

from ._structs import *  # noqa: F401,F403  (constants and Structures)
from ._structs import STRUCTS
from .errors import (ArchNotBuiltError, CudaError, InternalError, InvalidArgumentError,
                     KDTreeError, MisalignedError, NoDeviceError, StructVersionError,
                     UnsupportedError, WorkspaceTooSmallError, ERROR_CLASSES)
from ._lib import lib, exported_functions, load as load_library
from .api import (HEAD_DIM_LATENT, HEAD_DIM_ROPE, abi_version, build_info,
                  defrag_copy, defrag_plan, defrag_remap, defrag_remap_workspace_size,
                  device_supported, fragmentation_stats, last_error_message,
                  merge_attention_states, merge_attention_states_host, prepare,
                  sort_slots, sort_slots_workspace_size, status_string, struct_size,
                  verify_contiguous, verify_paged, verify_paged_host,
                  verify_paged_reference, verify_workspace_size, version, version_number)

__version__ = "0.1.0"

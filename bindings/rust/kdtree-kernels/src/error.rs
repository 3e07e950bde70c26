//! `Error`: a status plus the library's own thread-local message.
use kdtree_kernels_sys as sys;
use std::ffi::CStr;
use std::fmt;

pub use sys::Status;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    /// kdtree_last_error_message() right after the failing call, or a message
    /// of this crate for arguments it rejects before calling (then the status
    /// is INVALID_ARGUMENT and the message starts with the Rust function name).
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn invalid(message: String) -> Error {
        Error { status: Status::INVALID_ARGUMENT, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, status_string(self.status))
    }
}

impl std::error::Error for Error {}

/// The library's name of a status ("KDTREE_ERROR_MISALIGNED").
pub fn status_string(status: Status) -> &'static str {
    // Safety: kdtree_status_string returns a pointer to a static NUL-terminated
    // string for every input value.
    unsafe { static_str(sys::kdtree_status_string(status)) }
}

/// The message of the last failing call of the library on this thread.
pub fn last_error_message() -> String {
    // Safety: the returned pointer is a NUL-terminated thread-local buffer,
    // valid until the next library call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(sys::kdtree_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

/// Ok for KDTREE_OK, else the status with the library's message.
pub fn check(status: Status) -> Result<()> {
    if status.is_ok() {
        Ok(())
    } else {
        Err(Error { status, message: last_error_message() })
    }
}

/// Safety: `p` must be a NUL-terminated string with static storage.
pub(crate) unsafe fn static_str(p: *const std::ffi::c_char) -> &'static str {
    // Safety: guaranteed by the caller; the library's static strings are ASCII.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("<non-UTF-8>")
}

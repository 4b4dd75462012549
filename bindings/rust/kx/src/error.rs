use std::ffi::{CStr, CString};
use std::fmt;

/// A failed kx call: `code` is the kx_status (negative), `message` kx's one-line explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The KX_* name of the code, from the library ("KX_UNKNOWN_STATUS" for a code it does not define).
    pub fn name(&self) -> &'static str {
        status_name(self.code)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error { code: kx_sys::KX_E_INVALID_ARGUMENT, message: message.into() }
    }
}

/// The KX_* name of a status code, as kx.h writes it.
pub fn status_name(code: i32) -> &'static str {
    // kx_status_name returns static ASCII storage that is never freed.
    unsafe { CStr::from_ptr(kx_sys::kx_status_name(code)) }.to_str().unwrap_or("KX_UNKNOWN_STATUS")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kx: {}: {}", self.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Turns a status into Ok(status) (KX_OK or KX_STOPPED) or the Error of the last failed call on
/// this thread.
pub(crate) fn check(status: kx_sys::kx_status) -> Result<kx_sys::kx_status> {
    if status >= 0 {
        return Ok(status);
    }
    let msg = unsafe { kx_sys::kx_last_error_message() };
    let message = if msg.is_null() { String::new() } else { unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned() };
    Err(Error { code: status, message })
}

/// A C string for kx; a string with an interior NUL is an InvalidArgument error.
pub(crate) fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{} contains a NUL byte", what)))
}

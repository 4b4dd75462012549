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
    /// The KX_E_* name of the code.
    pub fn name(&self) -> &'static str {
        match self.code {
            -1 => "KX_E_INVALID_ARGUMENT",
            -2 => "KX_E_MISUSE",
            -3 => "KX_E_OUT_OF_MEMORY",
            -4 => "KX_E_DEVICE",
            -5 => "KX_E_IO",
            -6 => "KX_E_CORRUPT",
            -7 => "KX_E_UNSUPPORTED",
            -8 => "KX_E_DIVERGED",
            -9 => "KX_E_COMM",
            _ => "KX_E_INTERNAL",
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error { code: kx_sys::KX_E_INVALID_ARGUMENT, message: message.into() }
    }
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

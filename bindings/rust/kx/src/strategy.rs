use std::ptr;

use crate::error::{c_string, check, Result};

/// Which devices train: [`Strategy::default`] or [`Strategy::mirrored`].
pub struct Strategy {
    pub(crate) p: *mut kx_sys::kx_strategy,
}

// A strategy is used from one thread at a time; kx keeps no thread affinity.
unsafe impl Send for Strategy {}

impl Strategy {
    /// The first GPU, else the CPU.
    #[allow(clippy::should_implement_trait)]
    pub fn default() -> Result<Strategy> {
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_strategy_create_default(&mut p) })?;
        Ok(Strategy { p })
    }

    /// Synchronous replicas on the named devices ("cpu", "cuda:0"; a repeated name makes logical
    /// replicas). An empty list: every GPU, or one CPU replica without GPUs.
    pub fn mirrored(devices: &[&str]) -> Result<Strategy> {
        let names = devices.iter().map(|d| c_string(d, "a device name")).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut p = ptr::null_mut();
        let list = if ptrs.is_empty() { ptr::null() } else { ptrs.as_ptr() };
        check(unsafe { kx_sys::kx_strategy_create_mirrored(list, ptrs.len(), &mut p) })?;
        Ok(Strategy { p })
    }

    /// TensorFlow's num_replicas_in_sync.
    pub fn num_replicas(&self) -> i32 {
        unsafe { kx_sys::kx_strategy_num_replicas(self.p) }
    }

    /// CPU threads of models created afterwards (0 = every core).
    pub fn set_num_threads(&mut self, n: i32) -> Result<()> {
        check(unsafe { kx_sys::kx_strategy_set_num_threads(self.p, n) }).map(|_| ())
    }
}

impl Drop for Strategy {
    fn drop(&mut self) {
        unsafe { kx_sys::kx_strategy_destroy(self.p) }
    }
}

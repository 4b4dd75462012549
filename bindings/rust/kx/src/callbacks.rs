use std::any::Any;
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::rc::Rc;

use crate::error::{c_string, check, Result};

/// When a callback is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    TrainBegin,
    EpochBegin,
    BatchEnd,
    EpochEnd,
    TrainEnd,
    CheckpointSaved,
    Other(i32),
}

/// What a callback sees; metrics not known at that event are NaN, counters -1.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub epoch: i32,
    pub step: i64,
    pub steps_per_epoch: i64,
    pub global_step: i64,
    pub loss: f64,
    pub accuracy: f64,
    pub val_loss: f64,
    pub val_accuracy: f64,
    /// BatchEnd: this batch's own loss and accuracy (NaN unless the callback reads batch metrics).
    pub batch_loss: f64,
    pub batch_accuracy: f64,
    /// CheckpointSaved: the file written.
    pub path: Option<String>,
}

type Function = Box<dyn FnMut(&Event) -> bool>;

struct Slot {
    function: Function,
    panic: Rc<RefCell<Option<Box<dyn Any + Send>>>>,
}

/// Keras-like callbacks for [`crate::Model::fit`]. Closures return true to stop training; a panic in
/// one stops training and `fit` panics with it again.
pub struct Callbacks {
    pub(crate) p: *mut kx_sys::kx_callbacks,
    slots: Vec<Box<Slot>>, // boxed: kx holds their addresses
    pub(crate) panic: Rc<RefCell<Option<Box<dyn Any + Send>>>>,
}

impl Callbacks {
    pub fn new() -> Result<Callbacks> {
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_callbacks_create(&mut p) })?;
        Ok(Callbacks { p, slots: Vec::new(), panic: Rc::new(RefCell::new(None)) })
    }

    /// Keras's ModelCheckpoint: `{epoch:02d}`, `{step}`, `{loss}`, `{val_loss}` in the template;
    /// every_n_batches 0 saves at each epoch end; keep_last > 0 keeps that many newest files.
    pub fn model_checkpoint(&mut self, path_template: &str, every_n_batches: i64, keep_last: i32) -> Result<()> {
        let t = c_string(path_template, "the path template")?;
        check(unsafe { kx_sys::kx_callbacks_add_model_checkpoint(self.p, t.as_ptr(), every_n_batches, keep_last) })
            .map(|_| ())
    }

    /// Keras's EarlyStopping on `monitor` ("val_loss", "loss", ...).
    pub fn early_stopping(&mut self, monitor: &str, patience: i32, min_delta: f64, restore_best: bool) -> Result<()> {
        let m = c_string(monitor, "the monitored metric")?;
        check(unsafe {
            kx_sys::kx_callbacks_add_early_stopping(self.p, m.as_ptr(), patience, min_delta, restore_best as i32)
        })
        .map(|_| ())
    }

    /// A closure called at every event; returning true stops training.
    pub fn add<F: FnMut(&Event) -> bool + 'static>(&mut self, f: F) -> Result<()> {
        self.add_with_flags(f, 0)
    }

    /// As `add`, for a closure that does not read the loss or accuracy of BatchEnd events (it acts
    /// on epochs, or counts steps): a fit on a GPU then need not wait for each step's loss, and those
    /// events carry the latest values read, which may be some batches old.
    pub fn add_without_batch_metrics<F: FnMut(&Event) -> bool + 'static>(&mut self, f: F) -> Result<()> {
        self.add_with_flags(f, kx_sys::KX_CALLBACK_NO_BATCH_METRICS)
    }

    fn add_with_flags<F: FnMut(&Event) -> bool + 'static>(&mut self, f: F, flags: u32) -> Result<()> {
        let mut slot = Box::new(Slot { function: Box::new(f), panic: self.panic.clone() });
        let user = &mut *slot as *mut Slot as *mut c_void;
        check(unsafe { kx_sys::kx_callbacks_add_function_flags(self.p, Some(trampoline), user, flags) })?;
        self.slots.push(slot);
        Ok(())
    }
}

unsafe extern "C" fn trampoline(ev: *const kx_sys::kx_event, user: *mut c_void) -> i32 {
    let slot = &mut *(user as *mut Slot);
    if slot.panic.borrow().is_some() {
        return 1;
    }
    let e = &*ev;
    let event = Event {
        kind: match e.kind {
            kx_sys::KX_EVENT_TRAIN_BEGIN => EventKind::TrainBegin,
            kx_sys::KX_EVENT_EPOCH_BEGIN => EventKind::EpochBegin,
            kx_sys::KX_EVENT_BATCH_END => EventKind::BatchEnd,
            kx_sys::KX_EVENT_EPOCH_END => EventKind::EpochEnd,
            kx_sys::KX_EVENT_TRAIN_END => EventKind::TrainEnd,
            kx_sys::KX_EVENT_CHECKPOINT_SAVED => EventKind::CheckpointSaved,
            other => EventKind::Other(other),
        },
        epoch: e.epoch,
        step: e.step,
        steps_per_epoch: e.steps_per_epoch,
        global_step: e.global_step,
        loss: e.loss,
        accuracy: e.accuracy,
        val_loss: e.val_loss,
        val_accuracy: e.val_accuracy,
        batch_loss: e.batch_loss,
        batch_accuracy: e.batch_accuracy,
        path: if e.path.is_null() { None } else { Some(CStr::from_ptr(e.path).to_string_lossy().into_owned()) },
    };
    // A panic must not unwind into C: it stops training and fit resumes it.
    match catch_unwind(AssertUnwindSafe(|| (slot.function)(&event))) {
        Ok(stop) => stop as i32,
        Err(payload) => {
            *slot.panic.borrow_mut() = Some(payload);
            1
        }
    }
}

impl Drop for Callbacks {
    fn drop(&mut self) {
        unsafe { kx_sys::kx_callbacks_destroy(self.p) }
    }
}

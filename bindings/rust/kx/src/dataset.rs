use std::os::raw::c_void;
use std::ptr;

use crate::error::{c_string, check, Error, Result};

/// (x, y) samples held by kx.
pub struct Dataset {
    pub(crate) p: *mut kx_sys::kx_dataset,
}

unsafe impl Send for Dataset {}

impl Dataset {
    /// Copies x (row-major, x_shape[0] samples) and y (class indices, one-hot rows or targets).
    pub fn from_arrays(x: &[f32], x_shape: &[i64], y: &[f32], y_shape: &[i64]) -> Result<Dataset> {
        let count = |s: &[i64]| s.iter().product::<i64>();
        if x_shape.is_empty() || y_shape.is_empty() {
            return Err(Error::invalid("Dataset::from_arrays: shapes need at least one dimension"));
        }
        if x.len() as i64 != count(x_shape) || y.len() as i64 != count(y_shape) {
            return Err(Error::invalid(format!(
                "Dataset::from_arrays: {} x values for shape {:?}, {} y values for shape {:?}",
                x.len(),
                x_shape,
                y.len(),
                y_shape
            )));
        }
        let mut p = ptr::null_mut();
        check(unsafe {
            kx_sys::kx_dataset_from_arrays(
                x.as_ptr() as *const c_void,
                kx_sys::KX_DTYPE_F32,
                x_shape.as_ptr(),
                x_shape.len(),
                y.as_ptr() as *const c_void,
                kx_sys::KX_DTYPE_F32,
                y_shape.as_ptr(),
                y_shape.len(),
                &mut p,
            )
        })?;
        Ok(Dataset { p })
    }

    /// MNIST-format IDX image and label files (gzip-compressed or not).
    pub fn from_idx(images_path: &str, labels_path: &str) -> Result<Dataset> {
        let (i, l) = (c_string(images_path, "the images path")?, c_string(labels_path, "the labels path")?);
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_from_idx(i.as_ptr(), l.as_ptr(), &mut p) })?;
        Ok(Dataset { p })
    }

    /// The first n samples, sharing storage.
    pub fn take(&self, n: i64) -> Result<Dataset> {
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_take(self.p, n, &mut p) })?;
        Ok(Dataset { p })
    }

    /// All but the first n samples, sharing storage.
    pub fn skip(&self, n: i64) -> Result<Dataset> {
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_skip(self.p, n, &mut p) })?;
        Ok(Dataset { p })
    }

    /// Reshuffled every epoch from seed, with a buffer of buffer_size samples.
    pub fn shuffle(&mut self, buffer_size: i64, seed: u64) -> Result<()> {
        check(unsafe { kx_sys::kx_dataset_shuffle(self.p, buffer_size, seed) }).map(|_| ())
    }

    /// The global batch size, split by kx across a strategy's replicas.
    pub fn batch(&mut self, global_batch_size: i64, drop_remainder: bool) -> Result<()> {
        check(unsafe { kx_sys::kx_dataset_batch(self.p, global_batch_size, drop_remainder as i32) }).map(|_| ())
    }

    /// Keras's Normalization.adapt: the mean and variance of x per channel (`channels` = x's last
    /// axis) or over all values (`channels` = 1).
    pub fn feature_moments(&self, channels: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let (mut mean, mut variance) = (vec![0.0f32; channels], vec![0.0f32; channels]);
        check(unsafe { kx_sys::kx_dataset_feature_moments(self.p, mean.as_mut_ptr(), variance.as_mut_ptr(), channels) })?;
        Ok((mean, variance))
    }

    pub fn num_samples(&self) -> i64 {
        unsafe { kx_sys::kx_dataset_num_samples(self.p) }
    }
}

impl Drop for Dataset {
    fn drop(&mut self) {
        unsafe { kx_sys::kx_dataset_destroy(self.p) }
    }
}

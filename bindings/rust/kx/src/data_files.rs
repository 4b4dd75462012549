//! Datasets from files: numpy .npy, CSV and image folders; cache, prefetch and augmentation.
use std::ffi::CStr;
use std::ptr;

use crate::dataset::Dataset;
use crate::error::{c_string, check, Result};

impl Dataset {
    /// numpy .npy files (float32, float64, uint8, int32, int64; C order), x and y.
    pub fn from_npy(x_path: &str, y_path: &str) -> Result<Dataset> {
        let (x, y) = (c_string(x_path, "the x path")?, c_string(y_path, "the y path")?);
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_from_npy(x.as_ptr(), y.as_ptr(), &mut p) })?;
        Ok(Dataset { p })
    }

    /// A CSV file with a header row: the column named `label_column` is y, the others x.
    pub fn from_csv(path: &str, label_column: &str) -> Result<Dataset> {
        let (f, l) = (c_string(path, "the path")?, c_string(label_column, "the label column")?);
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_from_csv(f.as_ptr(), l.as_ptr(), &mut p) })?;
        Ok(Dataset { p })
    }

    /// Keras's image_dataset_from_directory: one subfolder per class (labels in sorted order), JPEG and
    /// PNG files decoded batch by batch, resized bilinearly to height x width, scaled to [0, 1].
    pub fn from_image_directory(dir: &str, height: i64, width: i64, channels: i64) -> Result<Dataset> {
        let d = c_string(dir, "the directory")?;
        let mut p = ptr::null_mut();
        check(unsafe { kx_sys::kx_dataset_from_image_directory(d.as_ptr(), height, width, channels, &mut p) })?;
        Ok(Dataset { p })
    }

    /// An image folder's class names (label i is names[i]); empty for other datasets.
    pub fn class_names(&self) -> Result<Vec<String>> {
        let n = unsafe { kx_sys::kx_dataset_num_classes(self.p) };
        let mut names = Vec::new();
        for i in 0..n {
            let mut name = ptr::null();
            check(unsafe { kx_sys::kx_dataset_class_name(self.p, i, &mut name) })?;
            names.push(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned());
        }
        Ok(names)
    }

    /// Files of an image folder left out because they did not decode.
    pub fn num_skipped(&self) -> i64 {
        unsafe { kx_sys::kx_dataset_num_skipped(self.p) }
    }

    /// Keeps decoded samples after their first decode: in memory (None) or in a file reused later.
    pub fn cache(&mut self, path: Option<&str>) -> Result<()> {
        match path {
            None => check(unsafe { kx_sys::kx_dataset_cache(self.p, ptr::null()) }).map(|_| ()),
            Some(path) => {
                let c = c_string(path, "the cache path")?;
                check(unsafe { kx_sys::kx_dataset_cache(self.p, c.as_ptr()) }).map(|_| ())
            }
        }
    }

    /// Decodes that many batches ahead of the step on a background thread.
    pub fn prefetch(&mut self, batches: i32) -> Result<()> {
        check(unsafe { kx_sys::kx_dataset_prefetch(self.p, batches) }).map(|_| ())
    }

    /// Keras's RandomFlip("horizontal", seed) on every image sample as it is read.
    pub fn random_flip(&mut self, seed: u64) -> Result<()> {
        check(unsafe { kx_sys::kx_dataset_random_flip(self.p, seed) }).map(|_| ())
    }

    /// Keras's RandomCrop(height, width, seed) on every image sample as it is read.
    pub fn random_crop(&mut self, height: i64, width: i64, seed: u64) -> Result<()> {
        check(unsafe { kx_sys::kx_dataset_random_crop(self.p, height, width, seed) }).map(|_| ())
    }
}

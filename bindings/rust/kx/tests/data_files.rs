//! The loaders from files: a CSV table and its errors, a .npy that is missing, an image folder with a
//! file that does not decode, trained with cache, prefetch and augmentation. (PNG files are written by
//! the C tests and the Python and Go bindings' tests; here a folder with only broken files is an error.)
use kx::{Activation, CompileOptions, Dataset, FitOptions, Model, Strategy};
use std::fs;

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kx-rust-{}-{}", tag, std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn csv_files_train_and_name_a_bad_cell() {
    let dir = temp_dir("csv");
    let path = dir.join("t.csv");
    let mut text = String::from("a,b,label\n");
    for i in 0..40 {
        text += &format!("{},{},{}\n", i % 5, (i * 3) % 7, i % 2);
    }
    fs::write(&path, text).unwrap();
    let mut d = Dataset::from_csv(path.to_str().unwrap(), "label").unwrap();
    assert_eq!(d.num_samples(), 40);
    assert_eq!(d.class_names().unwrap(), Vec::<String>::new());
    d.batch(8, false).unwrap();
    d.prefetch(2).unwrap();
    d.cache(None).unwrap();
    let s = Strategy::mirrored(&["cpu"]).unwrap();
    let mut m = Model::sequential(&s, &[2]).unwrap();
    m.add_dense(2, Activation::Softmax).unwrap();
    m.compile(&CompileOptions::default()).unwrap();
    m.fit(&mut d, &FitOptions { epochs: 1, ..Default::default() }, None).unwrap();
    fs::write(&path, "a,label\n1,0\n1.5.2,1\n").unwrap();
    let e = Dataset::from_csv(path.to_str().unwrap(), "label").err().unwrap();
    assert!(e.to_string().contains("line 3, column 1"), "{}", e);
    assert!(Dataset::from_npy(dir.join("x.npy").to_str().unwrap(), "y.npy").is_err());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn an_image_folder_without_decodable_files_is_an_error() {
    let dir = temp_dir("images");
    fs::create_dir_all(dir.join("cats")).unwrap();
    fs::write(dir.join("cats").join("a.png"), b"not a png").unwrap();
    let e = Dataset::from_image_directory(dir.to_str().unwrap(), 8, 8, 3).err().unwrap();
    assert!(e.to_string().contains("no decodable"), "{}", e);
    let _ = fs::remove_dir_all(&dir);
}

// Links libkx: from KX_LIB_DIR when set (a build tree), else the system's library path (packages).
fn main() {
    println!("cargo:rerun-if-env-changed=KX_LIB_DIR");
    if let Ok(dir) = std::env::var("KX_LIB_DIR") {
        println!("cargo:rustc-link-search=native={}", dir);
    }
    println!("cargo:rustc-link-lib=dylib=kx");
}

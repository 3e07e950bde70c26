//! Sets an rpath to the library directory found by kdtree-kernels-sys, so this
//! crate's tests and examples run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_KDTREE_KERNELS_C_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_KDTREE_KERNELS_C_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}

//! Finds libkdtree_kernels_c.so: $KDTREE_KERNELS_LIB_DIR, else the repository's
//! build tree (<repo>/build), else the system linker path. Emits the link search
//! path and an rpath (for this crate's tests) and exports the directory to
//! dependents as DEP_KDTREE_KERNELS_C_LIB_DIR so they can set their own rpath.
use std::env;
use std::path::PathBuf;

const LIB_FILE: &str = "libkdtree_kernels_c.so";

fn main() {
    println!("cargo:rerun-if-env-changed=KDTREE_KERNELS_LIB_DIR");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest.join("../../..");
    println!("cargo:include={}", repo.join("include").display());

    let dir = match env::var_os("KDTREE_KERNELS_LIB_DIR") {
        Some(d) => Some(PathBuf::from(d)),
        None => {
            let build_tree = repo.join("build");
            build_tree.join(LIB_FILE).exists().then_some(build_tree)
        }
    };
    if let Some(dir) = dir {
        let dir = dir.canonicalize().unwrap_or(dir);
        if !dir.join(LIB_FILE).exists() {
            println!("cargo:warning=no {} in {}", LIB_FILE, dir.display());
        }
        println!("cargo:rerun-if-changed={}", dir.join(LIB_FILE).display());
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        println!("cargo:lib_dir={}", dir.display());
    } else {
        println!(
            "cargo:warning={} not found in <repo>/build; set KDTREE_KERNELS_LIB_DIR \
             (falling back to the system linker path)",
            LIB_FILE
        );
    }
    println!("cargo:rustc-link-lib=dylib=kdtree_kernels_c");
}

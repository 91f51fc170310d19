//! Puts the directory sa-sys linked libsa from into the rpath of this crate's tests and
//! examples, so that they run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SA_LIB_DIR");
    if let Some(dir) = std::env::var_os("DEP_SA_LIB_DIR") {
        if std::env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("unix") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
        }
    }
}

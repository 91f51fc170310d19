//! Finds libsa: `SA_LIB_DIR` (a directory holding libsa.so) when set, else an installed copy
//! through the `pkg-config` program, else the linker's default search path. The directory is
//! also written into the rpath of this crate's test binaries, and passed to dependent crates
//! as `DEP_SA_LIB_DIR` so that they can do the same.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config_libdir() -> Option<PathBuf> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "sa"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?;
    let dir = dir.trim();
    if dir.is_empty() {
        None
    } else {
        Some(PathBuf::from(dir))
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=SA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = match env::var_os("SA_LIB_DIR") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => pkg_config_libdir(),
    };
    match dir {
        Some(dir) => {
            let dir = dir.canonicalize().unwrap_or(dir);
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rerun-if-changed={}", dir.join("libsa.so").display());
            if env::var("CARGO_CFG_TARGET_FAMILY").as_deref() == Ok("unix") {
                println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
            }
            println!("cargo:lib_dir={}", dir.display());
        }
        None => println!(
            "cargo:warning=SA_LIB_DIR is not set and pkg-config knows no `sa`: \
             linking libsa from the linker's default path"
        ),
    }
    println!("cargo:rustc-link-lib=dylib=sa");
}

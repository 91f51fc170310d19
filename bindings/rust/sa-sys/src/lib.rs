//! Raw declarations of the `sa` C API, generated from `include/sa/sa.h` by
//! `bindings/rust/regen.sh`. Every item is exactly the C one: read the header for the
//! contract of each function. The safe wrapper is the `sa` crate.
//!
//! Linking: `build.rs` links `libsa` from `SA_LIB_DIR` when it is set, else from the
//! directory `pkg-config --variable=libdir sa` names, else from the linker's default path.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![allow(clippy::all)]

include!("bindings.rs");

//! The compute devices this build of sa can use on this machine.
use sa_sys as sys;

use crate::error::{c_array_lossy, check, Result};
use crate::params::Backend;

/// One device (`sa_backend_desc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// Its kind: [`Backend::Cpu`], [`Backend::Cuda`] or [`Backend::Vulkan`].
    pub kind: Option<Backend>,
    /// Index within its kind ([`crate::SessionParams::device`]).
    pub device: usize,
    /// "NVIDIA H100 80GB HBM3", "CPU (16 threads)", ...
    pub name: String,
    /// Device memory (for the CPU: physical memory), in bytes.
    pub memory_bytes: u64,
    /// Free memory when listed, in bytes.
    pub free_bytes: u64,
    /// CUDA compute capability (major, minor); (0, 0) for other devices.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors (CUDA) or hardware threads (CPU); 0 for Vulkan.
    pub multiprocessors: i32,
    /// A GPU API run by the CPU (Mesa's lavapipe).
    pub software: bool,
}

/// The devices sessions can run on: the CPU first, then CUDA GPUs, then Vulkan devices
/// (`sa_backend_count`, `sa_backend_info`).
pub fn backends() -> Result<Vec<BackendInfo>> {
    // SAFETY: no arguments; never fails.
    let n = unsafe { sys::sa_backend_count() };
    let mut out = Vec::new();
    for i in 0..n {
        // SAFETY: plain data; zeroes are valid.
        let mut d: sys::sa_backend_desc = unsafe { std::mem::zeroed() };
        d.struct_size = std::mem::size_of::<sys::sa_backend_desc>() as u32;
        // SAFETY: index in range, valid out struct.
        check(unsafe { sys::sa_backend_info(i, &mut d) })?;
        out.push(BackendInfo {
            kind: Backend::from_raw(d.kind),
            device: usize::try_from(d.device).unwrap_or(0),
            name: c_array_lossy(&d.name),
            memory_bytes: d.memory_bytes,
            free_bytes: d.free_bytes,
            compute_capability: (d.compute_major, d.compute_minor),
            multiprocessors: d.multiprocessors,
            software: d.software != 0,
        });
    }
    Ok(out)
}

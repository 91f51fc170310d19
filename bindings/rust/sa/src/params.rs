//! `SessionParams` (`sa_session_params`) as a builder, and the enums of its settings.
use std::path::{Path, PathBuf};

use sa_sys as sys;

macro_rules! c_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $c:ident,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The C constant.
            pub fn to_raw(self) -> i32 {
                match self {
                    $($name::$variant => sys::$c,)+
                }
            }

            /// The variant of a C constant; `None` for a value these bindings do not know.
            pub fn from_raw(value: i32) -> Option<$name> {
                $(if value == sys::$c {
                    return Some($name::$variant);
                })+
                None
            }
        }
    };
}

c_enum! {
    /// Compute backend (`SA_BACKEND_*`).
    Backend {
        /// The best this build and machine offer: CUDA, else a hardware Vulkan GPU, else the CPU.
        Auto = SA_BACKEND_AUTO,
        /// The CPU.
        Cpu = SA_BACKEND_CPU,
        /// An NVIDIA GPU through CUDA.
        Cuda = SA_BACKEND_CUDA,
        /// A Vulkan 1.2 device.
        Vulkan = SA_BACKEND_VULKAN,
    }
}

c_enum! {
    /// Element type of the KV cache (`SA_KV_*`).
    KvType {
        /// The backend's choice: F32 on the CPU, F16 on a GPU.
        Default = SA_KV_DEFAULT,
        /// 32-bit floats.
        F32 = SA_KV_F32,
        /// IEEE binary16.
        F16 = SA_KV_F16,
        /// bfloat16.
        Bf16 = SA_KV_BF16,
    }
}

c_enum! {
    /// KV memory of a session (`SA_MEMORY_*`). The sparse methods' "full" memory is `Dense`.
    Memory {
        /// Every token's K/V kept, up to `n_ctx`.
        Dense = SA_MEMORY_DENSE,
        /// StreamingLLM: sinks plus a sliding window; constant memory.
        Streaming = SA_MEMORY_STREAMING,
        /// Cascading KV cache: sinks plus sub-caches that keep tokens by attention; constant memory.
        Cascade = SA_MEMORY_CASCADE,
    }
}

c_enum! {
    /// Query-aware page sparsity over the dense memory (`SA_SPARSE_*`).
    Sparse {
        /// Dense attention.
        None = SA_SPARSE_NONE,
        /// Quest: top pages by an upper bound of their scores.
        Quest = SA_SPARSE_QUEST,
        /// vAttention: top-k plus a sample sized by a statistical error bound.
        VAttention = SA_SPARSE_VATTENTION,
        /// The budget's tokens with the highest exact scores (a quality baseline).
        Oracle = SA_SPARSE_ORACLE,
    }
}

c_enum! {
    /// Who ranks pages under GQA (`SA_SELECT_*`).
    SelectGranularity {
        /// Each query head ranks with its own query (Quest).
        PerHead = SA_SELECT_PER_HEAD,
        /// One ranking per KV head with the group's mean query (ReSA).
        PerGroup = SA_SELECT_PER_GROUP,
    }
}

c_enum! {
    /// vAttention's deterministic top-k (`SA_TOPK_*`).
    VattTopK {
        /// The budget's pages by Quest's bound.
        Quest = SA_TOPK_QUEST,
        /// The budget's tokens by exact scores (a baseline).
        Oracle = SA_TOPK_ORACLE,
    }
}

c_enum! {
    /// Corrections of past decode outputs (`SA_CORRECTION_*`).
    Correction {
        /// None.
        None = SA_CORRECTION_NONE,
        /// RetroAttention (needs [`Sparse::Quest`]).
        Retro = SA_CORRECTION_RETRO,
    }
}

c_enum! {
    /// Speculative selection (`SA_SPECULATION_*`).
    Speculation {
        /// None.
        None = SA_SPECULATION_NONE,
        /// PRR: predict, reuse, repair (needs [`Sparse::Quest`]; every backend).
        Prr = SA_SPECULATION_PRR,
    }
}

c_enum! {
    /// What PRR's output is (`SA_PRR_*`).
    PrrMode {
        /// Attention over the predicted and the selected pages.
        Superset = SA_PRR_SUPERSET,
        /// Attention over the selected pages (Quest's output, to rounding).
        Strict = SA_PRR_STRICT,
    }
}

c_enum! {
    /// How the cascade reduces a GQA group's attention to one score per KV head
    /// (`SA_CASCADE_REDUCE_*`).
    CascadeReduction {
        /// Maximum.
        Max = SA_CASCADE_REDUCE_MAX,
        /// Mean.
        Mean = SA_CASCADE_REDUCE_MEAN,
        /// Median.
        Median = SA_CASCADE_REDUCE_MEDIAN,
        /// No token selection (the paper's ablation).
        None = SA_CASCADE_REDUCE_NONE,
    }
}

c_enum! {
    /// When a session with a store saves by itself (`SA_AUTOSAVE_*`).
    Autosave {
        /// Only [`crate::Session::save`] saves.
        Off = SA_AUTOSAVE_OFF,
        /// After every successful prefill.
        Prefill = SA_AUTOSAVE_PREFILL,
        /// After every successful prefill and decode step.
        Always = SA_AUTOSAVE_ALWAYS,
    }
}

/// The settings of a new session (`sa_session_params`), as a builder:
///
/// ```no_run
/// # fn main() -> sa::Result<()> {
/// let model = sa::Model::load("model.gguf")?;
/// let params = sa::SessionParams::new()
///     .backend(sa::Backend::Cpu)
///     .n_ctx(4096)
///     .sparse(sa::Sparse::Quest)
///     .budget_tokens(512)
///     .store("chats.db", "alice");
/// let session = model.session(&params)?;
/// # Ok(()) }
/// ```
///
/// [`SessionParams::new`] takes the library's defaults (`sa_session_params_init`); every
/// setter documents its C field. Values are checked by the library when the session is
/// created: an out-of-range one is [`crate::Status::InvalidArg`] naming it.
#[derive(Clone, Debug)]
pub struct SessionParams {
    // store_path, session_id and prr_profile are always NULL here; `with_raw` points them at
    // copies.
    raw: sys::sa_session_params,
    store: Option<(PathBuf, String)>,
    prr_profile: Option<PathBuf>,
}

// SAFETY: the only pointers in `raw`, store_path, session_id and prr_profile, are always NULL.
unsafe impl Send for SessionParams {}
// SAFETY: as above.
unsafe impl Sync for SessionParams {}

impl Default for SessionParams {
    fn default() -> Self {
        SessionParams::new()
    }
}

fn int(v: usize) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

macro_rules! setters {
    ($($(#[$meta:meta])* $name:ident($v:ident: $ty:ty) => $field:ident = $value:expr;)+) => {
        $(
            $(#[$meta])*
            #[must_use]
            pub fn $name(mut self, $v: $ty) -> Self {
                self.raw.$field = $value;
                self
            }
        )+
    };
}

impl SessionParams {
    /// The library's defaults.
    pub fn new() -> SessionParams {
        // SAFETY: sa_session_params is plain data (NULL pointers are valid); init fills it.
        let mut raw: sys::sa_session_params = unsafe { std::mem::zeroed() };
        // SAFETY: raw is a valid struct.
        unsafe { sys::sa_session_params_init(&mut raw) };
        SessionParams {
            raw,
            store: None,
            prr_profile: None,
        }
    }

    setters! {
        /// `backend`: where the session runs; default [`Backend::Auto`].
        backend(b: Backend) => backend = b.to_raw();
        /// `device`: index among the devices of the chosen backend; default 0.
        device(index: usize) => device = int(index);
        /// `n_threads`: CPU threads; 0 (default) = one per core.
        n_threads(n: usize) => n_threads = int(n);
        /// `n_ctx`: most tokens a dense session holds; 0 (default) = the trained context.
        n_ctx(n: usize) => n_ctx = int(n);
        /// `n_batch`: prefill chunk in tokens (also the progress granularity); 0 = 256.
        n_batch(n: usize) => n_batch = int(n);
        /// `memory`: the KV memory; default [`Memory::Dense`].
        memory(m: Memory) => memory = m.to_raw();
        /// `temperature`: 0 (default) = greedy; > 0 scales the logits.
        temperature(t: f32) => temperature = t;
        /// `top_k`: keep the k most likely tokens; 0 (default) = all.
        top_k(k: usize) => top_k = int(k);
        /// `top_p`: keep the smallest set with this probability; 1 (default) = all.
        top_p(p: f32) => top_p = p;
        /// `seed`: the sampler's random seed; default 0.
        seed(s: u64) => seed = s;
        /// `n_sinks`: first tokens a bounded memory always keeps; default 64.
        n_sinks(n: usize) => n_sinks = int(n);
        /// `cache_tokens`: bounded memory size in tokens, sinks included; 0 = trained context.
        cache_tokens(n: usize) => cache_tokens = int(n);
        /// `n_cascades`: cascade sub-caches; default 4.
        n_cascades(n: usize) => n_cascades = int(n);
        /// `cascade_beta`: EMA factor of the cascade's scores, in (0, 1]; default 0.9999.
        cascade_beta(beta: f32) => cascade_beta = beta;
        /// `cascade_reduction`: default [`CascadeReduction::Max`].
        cascade_reduction(r: CascadeReduction) => cascade_reduction = r.to_raw();
        /// `cascade_homogeneous`: one keep/drop decision for all KV heads; default false.
        cascade_homogeneous(on: bool) => cascade_homogeneous = i32::from(on);
        /// `sparse`: query-aware page sparsity; default [`Sparse::None`].
        sparse(s: Sparse) => sparse = s.to_raw();
        /// `page_size`: tokens per page, in [1, 1024]; default 16.
        page_size(n: usize) => page_size = int(n);
        /// `budget_tokens`: tokens attended per head and step; 0 (default) = `budget_ratio`.
        budget_tokens(n: usize) => budget_tokens = int(n);
        /// `budget_ratio`: budget as a fraction of the tokens held; default 0.125.
        budget_ratio(r: f32) => budget_ratio = r;
        /// `sink_pages`: first pages always attended; default 1.
        sink_pages(n: usize) => sink_pages = int(n);
        /// `local_pages`: newest pages always attended, >= 1; default 1.
        local_pages(n: usize) => local_pages = int(n);
        /// `min_pages`: fewest pages a head attends; default 3.
        min_pages(n: usize) => min_pages = int(n);
        /// `dense_layers`: first layers that stay dense; default 2.
        dense_layers(n: usize) => dense_layers = int(n);
        /// `select_granularity`: default [`SelectGranularity::PerHead`].
        select_granularity(g: SelectGranularity) => select_granularity = g.to_raw();
        /// `rectify_every`: ReSA rectification period in decode steps; 0 (default) = never.
        rectify_every(n: usize) => rectify_every = int(n);
        /// `vatt_epsilon`: vAttention relative error bound, in (0, 1); default 0.05.
        vatt_epsilon(e: f32) => vatt_epsilon = e;
        /// `vatt_delta`: vAttention failure probability, in (0, 1); default 0.05.
        vatt_delta(d: f32) => vatt_delta = d;
        /// `vatt_pilot_ratio`: pilot sample fraction; default 0.1.
        vatt_pilot_ratio(r: f32) => vatt_pilot_ratio = r;
        /// `vatt_topk`: default [`VattTopK::Quest`].
        vatt_topk(k: VattTopK) => vatt_topk = k.to_raw();
        /// `check_error`: sparse heads also run dense attention and record their error in
        /// [`crate::HeadStat::rel_error`]; default false.
        check_error(on: bool) => check_error = i32::from(on);
        /// `autosave`: default [`Autosave::Off`]; needs [`SessionParams::store`].
        autosave(a: Autosave) => autosave = a.to_raw();
        /// `kv_type`: default [`KvType::Default`].
        kv_type(t: KvType) => kv_type = t.to_raw();
        /// `correction`: default [`Correction::None`].
        correction(c: Correction) => correction = c.to_raw();
        /// `retro_window`: RetroAttention's window, in [2, 32]; default 2.
        retro_window(n: usize) => retro_window = int(n);
        /// `speculation`: default [`Speculation::None`].
        speculation(s: Speculation) => speculation = s.to_raw();
        /// `prr_mode`: default [`PrrMode::Superset`].
        prr_mode(m: PrrMode) => prr_mode = m.to_raw();
        /// `prr_ratio`: pages predicted per page selected, in (0, 16]; default 1.
        prr_ratio(r: f32) => prr_ratio = r;
    }

    /// `store_path` and `session_id`: the SQLite file the session is saved in and its name
    /// there (1..1024 bytes). Needed by [`crate::Session::save`] and [`crate::Session::resume`].
    #[must_use]
    pub fn store(mut self, path: impl AsRef<Path>, session_id: impl Into<String>) -> Self {
        self.store = Some((path.as_ref().to_path_buf(), session_id.into()));
        self
    }

    /// The store file and session id, if set.
    pub fn store_location(&self) -> Option<(&Path, &str)> {
        self.store
            .as_ref()
            .map(|(p, id)| (p.as_path(), id.as_str()))
    }

    /// `prr_profile`: a profile file of `sa-bench gpu prr-profile` from which PRR takes r per
    /// attention bucket instead of [`SessionParams::prr_ratio`]; default none. Needs
    /// [`Speculation::Prr`]; the file must hold a profile for this model, device and selection
    /// settings ([`crate::Status::InvalidArg`] otherwise), and is read when the session is
    /// created or resumed ([`crate::Status::Io`] / [`crate::Status::Format`]). Unlike the other
    /// PRR settings it is also taken by [`crate::Session::resume`].
    #[must_use]
    pub fn prr_profile(mut self, path: impl AsRef<Path>) -> Self {
        self.prr_profile = Some(path.as_ref().to_path_buf());
        self
    }

    /// The PRR profile file, if set.
    pub fn prr_profile_path(&self) -> Option<&Path> {
        self.prr_profile.as_deref()
    }

    /// Calls `f` with the C struct, its strings pointing at copies that live during the call.
    pub(crate) fn with_raw<R>(
        &self,
        f: impl FnOnce(&sys::sa_session_params) -> R,
    ) -> crate::Result<R> {
        let mut raw = self.raw;
        let mut strings = None;
        if let Some((path, id)) = &self.store {
            let path = crate::model::path_to_cstring(path)?;
            let id = crate::model::str_to_cstring(id, "the session id")?;
            raw.store_path = path.as_ptr();
            raw.session_id = id.as_ptr();
            strings = Some((path, id));
        }
        let mut profile = None;
        if let Some(path) = &self.prr_profile {
            let path = crate::model::path_to_cstring(path)?;
            raw.prr_profile = path.as_ptr();
            profile = Some(path);
        }
        let r = f(&raw);
        drop(strings);
        drop(profile);
        Ok(r)
    }
}

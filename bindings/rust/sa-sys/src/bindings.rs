// Generated from include/sa/sa.h by bindings/rust/regen.sh; do not edit.


pub const SA_VERSION_MAJOR: i32 = 0;
pub const SA_VERSION_MINOR: i32 = 1;
pub const SA_VERSION_PATCH: i32 = 0;
pub const SA_VERSION_STRING: &[u8; 6usize] = b"0.1.0\0";
pub const SA_VERSION_NUMBER: i32 = 1000;
pub const SA_OK: i32 = 0;
pub const SA_DONE: i32 = 1;
pub const SA_ERR_INVALID_ARG: i32 = 2;
pub const SA_ERR_MISUSE: i32 = 3;
pub const SA_ERR_IO: i32 = 4;
pub const SA_ERR_FORMAT: i32 = 5;
pub const SA_ERR_UNSUPPORTED: i32 = 6;
pub const SA_ERR_NOMEM: i32 = 7;
pub const SA_ERR_BACKEND: i32 = 8;
pub const SA_ERR_STORE: i32 = 9;
pub const SA_ERR_CONTEXT_FULL: i32 = 10;
pub const SA_ERR_CANCELLED: i32 = 11;
pub const SA_ERR_BUFFER_TOO_SMALL: i32 = 12;
pub const SA_ERR_INTERNAL: i32 = 13;
pub const SA_TOKENIZE_ADD_SPECIAL: i32 = 1;
pub const SA_TOKENIZE_PARSE_SPECIAL: i32 = 2;
pub const SA_TOKENIZE_NFC: i32 = 4;
pub const SA_TOKENIZE_NO_NORMALIZE: i32 = 8;
pub const SA_TOKENIZE_SPM_NON_LEGACY: i32 = 16;
pub const SA_PIECE_RENDER_SPECIAL: i32 = 1;
pub const SA_BACKEND_AUTO: i32 = 0;
pub const SA_BACKEND_CPU: i32 = 1;
pub const SA_BACKEND_CUDA: i32 = 2;
pub const SA_BACKEND_VULKAN: i32 = 3;
pub const SA_KV_DEFAULT: i32 = 0;
pub const SA_KV_F32: i32 = 1;
pub const SA_KV_F16: i32 = 2;
pub const SA_KV_BF16: i32 = 3;
pub const SA_MEMORY_DENSE: i32 = 0;
pub const SA_MEMORY_STREAMING: i32 = 1;
pub const SA_MEMORY_CASCADE: i32 = 2;
pub const SA_MEMORY_FULL: i32 = 0;
pub const SA_SPARSE_NONE: i32 = 0;
pub const SA_SPARSE_QUEST: i32 = 1;
pub const SA_SPARSE_VATTENTION: i32 = 2;
pub const SA_SPARSE_ORACLE: i32 = 3;
pub const SA_SELECT_PER_HEAD: i32 = 0;
pub const SA_SELECT_PER_GROUP: i32 = 1;
pub const SA_TOPK_QUEST: i32 = 0;
pub const SA_TOPK_ORACLE: i32 = 1;
pub const SA_CORRECTION_NONE: i32 = 0;
pub const SA_CORRECTION_RETRO: i32 = 1;
pub const SA_SPECULATION_NONE: i32 = 0;
pub const SA_SPECULATION_PRR: i32 = 1;
pub const SA_PRR_SUPERSET: i32 = 0;
pub const SA_PRR_STRICT: i32 = 1;
pub const SA_CASCADE_REDUCE_MAX: i32 = 0;
pub const SA_CASCADE_REDUCE_MEAN: i32 = 1;
pub const SA_CASCADE_REDUCE_MEDIAN: i32 = 2;
pub const SA_CASCADE_REDUCE_NONE: i32 = 3;
pub const SA_AUTOSAVE_OFF: i32 = 0;
pub const SA_AUTOSAVE_PREFILL: i32 = 1;
pub const SA_AUTOSAVE_ALWAYS: i32 = 2;
extern "C" {
    pub fn sa_version_number() -> i32;
}
extern "C" {
    pub fn sa_version_string() -> *const ::std::os::raw::c_char;
}
pub type sa_status = i32;
extern "C" {
    pub fn sa_errstr(status: sa_status) -> *const ::std::os::raw::c_char;
}
extern "C" {
    pub fn sa_last_error() -> *const ::std::os::raw::c_char;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_model {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_model_params {
    pub struct_size: u32,
    pub use_mmap: i32,
}
#[test]
fn bindgen_test_layout_sa_model_params() {
    assert_eq!(
        ::std::mem::size_of::<sa_model_params>(),
        8usize,
        concat!("Size of: ", stringify!(sa_model_params))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_model_params>(),
        4usize,
        concat!("Alignment of ", stringify!(sa_model_params))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_params),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_use_mmap() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).use_mmap) as usize - ptr as usize
            },
            4usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_params),
                "::",
                stringify!(use_mmap)
            )
        );
    }
    test_field_use_mmap();
}
extern "C" {
    pub fn sa_model_params_init(params: *mut sa_model_params);
}
extern "C" {
    pub fn sa_model_load(
        path: *const ::std::os::raw::c_char,
        params: *const sa_model_params,
        out_model: *mut *mut sa_model,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_model_load_from_memory(
        data: *const ::std::os::raw::c_void,
        size: usize,
        params: *const sa_model_params,
        out_model: *mut *mut sa_model,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_model_destroy(model: *mut sa_model);
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_model_desc {
    pub struct_size: u32,
    pub architecture: [::std::os::raw::c_char; 32usize],
    pub name: [::std::os::raw::c_char; 128usize],
    pub n_layers: i32,
    pub n_heads: i32,
    pub n_kv_heads: i32,
    pub head_dim: i32,
    pub n_embd: i32,
    pub n_ff: i32,
    pub n_ctx_train: i32,
    pub n_vocab: i32,
    pub bos_token: i32,
    pub eos_token: i32,
    pub rope_freq_base: f32,
    pub n_params: u64,
    pub weight_bytes: u64,
    pub tokenizer_nfc: i32,
}
#[test]
fn bindgen_test_layout_sa_model_desc() {
    assert_eq!(
        ::std::mem::size_of::<sa_model_desc>(),
        232usize,
        concat!("Size of: ", stringify!(sa_model_desc))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_model_desc>(),
        8usize,
        concat!("Alignment of ", stringify!(sa_model_desc))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_architecture() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).architecture) as usize - ptr as usize
            },
            4usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(architecture)
            )
        );
    }
    test_field_architecture();
    fn test_field_name() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).name) as usize - ptr as usize
            },
            36usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(name)
            )
        );
    }
    test_field_name();
    fn test_field_n_layers() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_layers) as usize - ptr as usize
            },
            164usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_layers)
            )
        );
    }
    test_field_n_layers();
    fn test_field_n_heads() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_heads) as usize - ptr as usize
            },
            168usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_heads)
            )
        );
    }
    test_field_n_heads();
    fn test_field_n_kv_heads() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_kv_heads) as usize - ptr as usize
            },
            172usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_kv_heads)
            )
        );
    }
    test_field_n_kv_heads();
    fn test_field_head_dim() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).head_dim) as usize - ptr as usize
            },
            176usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(head_dim)
            )
        );
    }
    test_field_head_dim();
    fn test_field_n_embd() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_embd) as usize - ptr as usize
            },
            180usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_embd)
            )
        );
    }
    test_field_n_embd();
    fn test_field_n_ff() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_ff) as usize - ptr as usize
            },
            184usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_ff)
            )
        );
    }
    test_field_n_ff();
    fn test_field_n_ctx_train() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_ctx_train) as usize - ptr as usize
            },
            188usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_ctx_train)
            )
        );
    }
    test_field_n_ctx_train();
    fn test_field_n_vocab() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_vocab) as usize - ptr as usize
            },
            192usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_vocab)
            )
        );
    }
    test_field_n_vocab();
    fn test_field_bos_token() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).bos_token) as usize - ptr as usize
            },
            196usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(bos_token)
            )
        );
    }
    test_field_bos_token();
    fn test_field_eos_token() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).eos_token) as usize - ptr as usize
            },
            200usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(eos_token)
            )
        );
    }
    test_field_eos_token();
    fn test_field_rope_freq_base() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).rope_freq_base) as usize - ptr as usize
            },
            204usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(rope_freq_base)
            )
        );
    }
    test_field_rope_freq_base();
    fn test_field_n_params() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_params) as usize - ptr as usize
            },
            208usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(n_params)
            )
        );
    }
    test_field_n_params();
    fn test_field_weight_bytes() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).weight_bytes) as usize - ptr as usize
            },
            216usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(weight_bytes)
            )
        );
    }
    test_field_weight_bytes();
    fn test_field_tokenizer_nfc() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_model_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).tokenizer_nfc) as usize - ptr as usize
            },
            224usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_model_desc),
                "::",
                stringify!(tokenizer_nfc)
            )
        );
    }
    test_field_tokenizer_nfc();
}
extern "C" {
    pub fn sa_model_info(model: *const sa_model, out: *mut sa_model_desc) -> sa_status;
}
extern "C" {
    pub fn sa_model_meta_string(
        model: *const sa_model,
        key: *const ::std::os::raw::c_char,
        buf: *mut ::std::os::raw::c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_tokenize(
        model: *const sa_model,
        text: *const ::std::os::raw::c_char,
        text_len: usize,
        flags: u32,
        tokens: *mut i32,
        capacity: usize,
        out_n: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_token_to_piece(
        model: *const sa_model,
        token: i32,
        flags: u32,
        buf: *mut ::std::os::raw::c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_token_is_eog(model: *const sa_model, token: i32) -> i32;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_detokenizer {
    _unused: [u8; 0],
}
extern "C" {
    pub fn sa_detokenizer_create(
        model: *const sa_model,
        flags: u32,
        out_detokenizer: *mut *mut sa_detokenizer,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_detokenizer_push(
        detokenizer: *mut sa_detokenizer,
        token: i32,
        buf: *mut ::std::os::raw::c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_detokenizer_flush(
        detokenizer: *mut sa_detokenizer,
        buf: *mut ::std::os::raw::c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_detokenizer_destroy(detokenizer: *mut sa_detokenizer);
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_session {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_session_params {
    pub struct_size: u32,
    pub backend: i32,
    pub n_threads: i32,
    pub n_ctx: i32,
    pub n_batch: i32,
    pub memory: i32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub seed: u64,
    pub n_sinks: i32,
    pub cache_tokens: i32,
    pub n_cascades: i32,
    pub cascade_beta: f32,
    pub cascade_reduction: i32,
    pub cascade_homogeneous: i32,
    pub sparse: i32,
    pub page_size: i32,
    pub budget_tokens: i32,
    pub budget_ratio: f32,
    pub sink_pages: i32,
    pub local_pages: i32,
    pub min_pages: i32,
    pub dense_layers: i32,
    pub select_granularity: i32,
    pub rectify_every: i32,
    pub vatt_epsilon: f32,
    pub vatt_delta: f32,
    pub vatt_pilot_ratio: f32,
    pub vatt_topk: i32,
    pub check_error: i32,
    pub store_path: *const ::std::os::raw::c_char,
    pub session_id: *const ::std::os::raw::c_char,
    pub autosave: i32,
    pub device: i32,
    pub kv_type: i32,
    pub correction: i32,
    pub retro_window: i32,
    pub speculation: i32,
    pub prr_mode: i32,
    pub prr_ratio: f32,
    pub prr_profile: *const ::std::os::raw::c_char,
}
#[test]
fn bindgen_test_layout_sa_session_params() {
    assert_eq!(
        ::std::mem::size_of::<sa_session_params>(),
        192usize,
        concat!("Size of: ", stringify!(sa_session_params))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_session_params>(),
        8usize,
        concat!("Alignment of ", stringify!(sa_session_params))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_backend() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).backend) as usize - ptr as usize
            },
            4usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(backend)
            )
        );
    }
    test_field_backend();
    fn test_field_n_threads() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_threads) as usize - ptr as usize
            },
            8usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(n_threads)
            )
        );
    }
    test_field_n_threads();
    fn test_field_n_ctx() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_ctx) as usize - ptr as usize
            },
            12usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(n_ctx)
            )
        );
    }
    test_field_n_ctx();
    fn test_field_n_batch() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_batch) as usize - ptr as usize
            },
            16usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(n_batch)
            )
        );
    }
    test_field_n_batch();
    fn test_field_memory() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).memory) as usize - ptr as usize
            },
            20usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(memory)
            )
        );
    }
    test_field_memory();
    fn test_field_temperature() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).temperature) as usize - ptr as usize
            },
            24usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(temperature)
            )
        );
    }
    test_field_temperature();
    fn test_field_top_k() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).top_k) as usize - ptr as usize
            },
            28usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(top_k)
            )
        );
    }
    test_field_top_k();
    fn test_field_top_p() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).top_p) as usize - ptr as usize
            },
            32usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(top_p)
            )
        );
    }
    test_field_top_p();
    fn test_field_seed() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).seed) as usize - ptr as usize
            },
            40usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(seed)
            )
        );
    }
    test_field_seed();
    fn test_field_n_sinks() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_sinks) as usize - ptr as usize
            },
            48usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(n_sinks)
            )
        );
    }
    test_field_n_sinks();
    fn test_field_cache_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).cache_tokens) as usize - ptr as usize
            },
            52usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(cache_tokens)
            )
        );
    }
    test_field_cache_tokens();
    fn test_field_n_cascades() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_cascades) as usize - ptr as usize
            },
            56usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(n_cascades)
            )
        );
    }
    test_field_n_cascades();
    fn test_field_cascade_beta() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).cascade_beta) as usize - ptr as usize
            },
            60usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(cascade_beta)
            )
        );
    }
    test_field_cascade_beta();
    fn test_field_cascade_reduction() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).cascade_reduction) as usize - ptr as usize
            },
            64usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(cascade_reduction)
            )
        );
    }
    test_field_cascade_reduction();
    fn test_field_cascade_homogeneous() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).cascade_homogeneous) as usize - ptr as usize
            },
            68usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(cascade_homogeneous)
            )
        );
    }
    test_field_cascade_homogeneous();
    fn test_field_sparse() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).sparse) as usize - ptr as usize
            },
            72usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(sparse)
            )
        );
    }
    test_field_sparse();
    fn test_field_page_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).page_size) as usize - ptr as usize
            },
            76usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(page_size)
            )
        );
    }
    test_field_page_size();
    fn test_field_budget_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).budget_tokens) as usize - ptr as usize
            },
            80usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(budget_tokens)
            )
        );
    }
    test_field_budget_tokens();
    fn test_field_budget_ratio() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).budget_ratio) as usize - ptr as usize
            },
            84usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(budget_ratio)
            )
        );
    }
    test_field_budget_ratio();
    fn test_field_sink_pages() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).sink_pages) as usize - ptr as usize
            },
            88usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(sink_pages)
            )
        );
    }
    test_field_sink_pages();
    fn test_field_local_pages() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).local_pages) as usize - ptr as usize
            },
            92usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(local_pages)
            )
        );
    }
    test_field_local_pages();
    fn test_field_min_pages() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).min_pages) as usize - ptr as usize
            },
            96usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(min_pages)
            )
        );
    }
    test_field_min_pages();
    fn test_field_dense_layers() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).dense_layers) as usize - ptr as usize
            },
            100usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(dense_layers)
            )
        );
    }
    test_field_dense_layers();
    fn test_field_select_granularity() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).select_granularity) as usize - ptr as usize
            },
            104usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(select_granularity)
            )
        );
    }
    test_field_select_granularity();
    fn test_field_rectify_every() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).rectify_every) as usize - ptr as usize
            },
            108usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(rectify_every)
            )
        );
    }
    test_field_rectify_every();
    fn test_field_vatt_epsilon() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).vatt_epsilon) as usize - ptr as usize
            },
            112usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(vatt_epsilon)
            )
        );
    }
    test_field_vatt_epsilon();
    fn test_field_vatt_delta() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).vatt_delta) as usize - ptr as usize
            },
            116usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(vatt_delta)
            )
        );
    }
    test_field_vatt_delta();
    fn test_field_vatt_pilot_ratio() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).vatt_pilot_ratio) as usize - ptr as usize
            },
            120usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(vatt_pilot_ratio)
            )
        );
    }
    test_field_vatt_pilot_ratio();
    fn test_field_vatt_topk() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).vatt_topk) as usize - ptr as usize
            },
            124usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(vatt_topk)
            )
        );
    }
    test_field_vatt_topk();
    fn test_field_check_error() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).check_error) as usize - ptr as usize
            },
            128usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(check_error)
            )
        );
    }
    test_field_check_error();
    fn test_field_store_path() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).store_path) as usize - ptr as usize
            },
            136usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(store_path)
            )
        );
    }
    test_field_store_path();
    fn test_field_session_id() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).session_id) as usize - ptr as usize
            },
            144usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(session_id)
            )
        );
    }
    test_field_session_id();
    fn test_field_autosave() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).autosave) as usize - ptr as usize
            },
            152usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(autosave)
            )
        );
    }
    test_field_autosave();
    fn test_field_device() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).device) as usize - ptr as usize
            },
            156usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(device)
            )
        );
    }
    test_field_device();
    fn test_field_kv_type() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kv_type) as usize - ptr as usize
            },
            160usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(kv_type)
            )
        );
    }
    test_field_kv_type();
    fn test_field_correction() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).correction) as usize - ptr as usize
            },
            164usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(correction)
            )
        );
    }
    test_field_correction();
    fn test_field_retro_window() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).retro_window) as usize - ptr as usize
            },
            168usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(retro_window)
            )
        );
    }
    test_field_retro_window();
    fn test_field_speculation() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).speculation) as usize - ptr as usize
            },
            172usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(speculation)
            )
        );
    }
    test_field_speculation();
    fn test_field_prr_mode() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_mode) as usize - ptr as usize
            },
            176usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(prr_mode)
            )
        );
    }
    test_field_prr_mode();
    fn test_field_prr_ratio() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_ratio) as usize - ptr as usize
            },
            180usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(prr_ratio)
            )
        );
    }
    test_field_prr_ratio();
    fn test_field_prr_profile() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_session_params>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_profile) as usize - ptr as usize
            },
            184usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_session_params),
                "::",
                stringify!(prr_profile)
            )
        );
    }
    test_field_prr_profile();
}
extern "C" {
    pub fn sa_session_params_init(params: *mut sa_session_params);
}
extern "C" {
    pub fn sa_session_create(
        model: *mut sa_model,
        params: *const sa_session_params,
        out_session: *mut *mut sa_session,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_session_destroy(session: *mut sa_session);
}
extern "C" {
    pub fn sa_session_errmsg(session: *const sa_session) -> *const ::std::os::raw::c_char;
}
pub type sa_progress_fn = ::std::option::Option<
    unsafe extern "C" fn(
        n_done: usize,
        n_total: usize,
        user_data: *mut ::std::os::raw::c_void,
    ) -> i32,
>;
extern "C" {
    pub fn sa_prefill(
        session: *mut sa_session,
        tokens: *const i32,
        n_tokens: usize,
        progress: sa_progress_fn,
        user_data: *mut ::std::os::raw::c_void,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_sample(session: *mut sa_session, out_token: *mut i32) -> sa_status;
}
extern "C" {
    pub fn sa_decode_step(
        session: *mut sa_session,
        token_in: i32,
        out_token: *mut i32,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_session_logits(session: *const sa_session, out_n_vocab: *mut i32) -> *const f32;
}
extern "C" {
    pub fn sa_session_tokens(
        session: *const sa_session,
        out_tokens: *mut *const i32,
        out_n: *mut usize,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_session_reset(session: *mut sa_session) -> sa_status;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_stats {
    pub struct_size: u32,
    pub n_tokens: u64,
    pub n_kv_tokens: u64,
    pub kv_bytes_held: u64,
    pub kv_bytes_capacity: u64,
    pub kv_bytes_read_last_step: u64,
    pub weight_bytes: u64,
    pub last_call_ms: f64,
    pub last_call_tokens: u64,
    pub sparse_keys_attended: u64,
    pub sparse_keys_total: u64,
    pub n_rectified: u64,
    pub backend: i32,
    pub device: i32,
    pub kv_type: i32,
    pub retro_effective_budget: f64,
    pub prr_hit_rate: f64,
    pub prr_missed_pages: f64,
    pub prr_calibration_ms: f64,
    pub prr_ratio: f64,
}
#[test]
fn bindgen_test_layout_sa_stats() {
    assert_eq!(
        ::std::mem::size_of::<sa_stats>(),
        152usize,
        concat!("Size of: ", stringify!(sa_stats))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_stats>(),
        8usize,
        concat!("Alignment of ", stringify!(sa_stats))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_n_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_tokens) as usize - ptr as usize
            },
            8usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(n_tokens)
            )
        );
    }
    test_field_n_tokens();
    fn test_field_n_kv_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_kv_tokens) as usize - ptr as usize
            },
            16usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(n_kv_tokens)
            )
        );
    }
    test_field_n_kv_tokens();
    fn test_field_kv_bytes_held() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kv_bytes_held) as usize - ptr as usize
            },
            24usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(kv_bytes_held)
            )
        );
    }
    test_field_kv_bytes_held();
    fn test_field_kv_bytes_capacity() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kv_bytes_capacity) as usize - ptr as usize
            },
            32usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(kv_bytes_capacity)
            )
        );
    }
    test_field_kv_bytes_capacity();
    fn test_field_kv_bytes_read_last_step() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kv_bytes_read_last_step) as usize - ptr as usize
            },
            40usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(kv_bytes_read_last_step)
            )
        );
    }
    test_field_kv_bytes_read_last_step();
    fn test_field_weight_bytes() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).weight_bytes) as usize - ptr as usize
            },
            48usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(weight_bytes)
            )
        );
    }
    test_field_weight_bytes();
    fn test_field_last_call_ms() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).last_call_ms) as usize - ptr as usize
            },
            56usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(last_call_ms)
            )
        );
    }
    test_field_last_call_ms();
    fn test_field_last_call_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).last_call_tokens) as usize - ptr as usize
            },
            64usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(last_call_tokens)
            )
        );
    }
    test_field_last_call_tokens();
    fn test_field_sparse_keys_attended() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).sparse_keys_attended) as usize - ptr as usize
            },
            72usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(sparse_keys_attended)
            )
        );
    }
    test_field_sparse_keys_attended();
    fn test_field_sparse_keys_total() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).sparse_keys_total) as usize - ptr as usize
            },
            80usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(sparse_keys_total)
            )
        );
    }
    test_field_sparse_keys_total();
    fn test_field_n_rectified() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_rectified) as usize - ptr as usize
            },
            88usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(n_rectified)
            )
        );
    }
    test_field_n_rectified();
    fn test_field_backend() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).backend) as usize - ptr as usize
            },
            96usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(backend)
            )
        );
    }
    test_field_backend();
    fn test_field_device() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).device) as usize - ptr as usize
            },
            100usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(device)
            )
        );
    }
    test_field_device();
    fn test_field_kv_type() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kv_type) as usize - ptr as usize
            },
            104usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(kv_type)
            )
        );
    }
    test_field_kv_type();
    fn test_field_retro_effective_budget() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).retro_effective_budget) as usize - ptr as usize
            },
            112usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(retro_effective_budget)
            )
        );
    }
    test_field_retro_effective_budget();
    fn test_field_prr_hit_rate() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_hit_rate) as usize - ptr as usize
            },
            120usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(prr_hit_rate)
            )
        );
    }
    test_field_prr_hit_rate();
    fn test_field_prr_missed_pages() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_missed_pages) as usize - ptr as usize
            },
            128usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(prr_missed_pages)
            )
        );
    }
    test_field_prr_missed_pages();
    fn test_field_prr_calibration_ms() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_calibration_ms) as usize - ptr as usize
            },
            136usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(prr_calibration_ms)
            )
        );
    }
    test_field_prr_calibration_ms();
    fn test_field_prr_ratio() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stats>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).prr_ratio) as usize - ptr as usize
            },
            144usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stats),
                "::",
                stringify!(prr_ratio)
            )
        );
    }
    test_field_prr_ratio();
}
extern "C" {
    pub fn sa_session_stats(session: *const sa_session, out: *mut sa_stats) -> sa_status;
}
extern "C" {
    pub fn sa_session_memory_positions(
        session: *const sa_session,
        layer: i32,
        kv_head: i32,
        positions: *mut u64,
        capacity: usize,
        out_count: *mut usize,
    ) -> sa_status;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_head_stat {
    pub layer: i32,
    pub head: i32,
    pub keys_attended: i32,
    pub keys_total: i32,
    pub sample_budget: i32,
    pub rel_error: f32,
}
#[test]
fn bindgen_test_layout_sa_head_stat() {
    assert_eq!(
        ::std::mem::size_of::<sa_head_stat>(),
        24usize,
        concat!("Size of: ", stringify!(sa_head_stat))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_head_stat>(),
        4usize,
        concat!("Alignment of ", stringify!(sa_head_stat))
    );
    fn test_field_layer() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).layer) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(layer)
            )
        );
    }
    test_field_layer();
    fn test_field_head() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).head) as usize - ptr as usize
            },
            4usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(head)
            )
        );
    }
    test_field_head();
    fn test_field_keys_attended() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).keys_attended) as usize - ptr as usize
            },
            8usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(keys_attended)
            )
        );
    }
    test_field_keys_attended();
    fn test_field_keys_total() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).keys_total) as usize - ptr as usize
            },
            12usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(keys_total)
            )
        );
    }
    test_field_keys_total();
    fn test_field_sample_budget() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).sample_budget) as usize - ptr as usize
            },
            16usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(sample_budget)
            )
        );
    }
    test_field_sample_budget();
    fn test_field_rel_error() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_head_stat>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).rel_error) as usize - ptr as usize
            },
            20usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_head_stat),
                "::",
                stringify!(rel_error)
            )
        );
    }
    test_field_rel_error();
}
extern "C" {
    pub fn sa_session_head_stats(
        session: *const sa_session,
        out: *mut sa_head_stat,
        capacity: usize,
        out_n: *mut usize,
    ) -> sa_status;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_backend_desc {
    pub struct_size: u32,
    pub kind: i32,
    pub device: i32,
    pub name: [::std::os::raw::c_char; 128usize],
    pub memory_bytes: u64,
    pub free_bytes: u64,
    pub compute_major: i32,
    pub compute_minor: i32,
    pub multiprocessors: i32,
    pub software: i32,
}
#[test]
fn bindgen_test_layout_sa_backend_desc() {
    assert_eq!(
        ::std::mem::size_of::<sa_backend_desc>(),
        176usize,
        concat!("Size of: ", stringify!(sa_backend_desc))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_backend_desc>(),
        8usize,
        concat!("Alignment of ", stringify!(sa_backend_desc))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_kind() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).kind) as usize - ptr as usize
            },
            4usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(kind)
            )
        );
    }
    test_field_kind();
    fn test_field_device() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).device) as usize - ptr as usize
            },
            8usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(device)
            )
        );
    }
    test_field_device();
    fn test_field_name() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).name) as usize - ptr as usize
            },
            12usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(name)
            )
        );
    }
    test_field_name();
    fn test_field_memory_bytes() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).memory_bytes) as usize - ptr as usize
            },
            144usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(memory_bytes)
            )
        );
    }
    test_field_memory_bytes();
    fn test_field_free_bytes() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).free_bytes) as usize - ptr as usize
            },
            152usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(free_bytes)
            )
        );
    }
    test_field_free_bytes();
    fn test_field_compute_major() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).compute_major) as usize - ptr as usize
            },
            160usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(compute_major)
            )
        );
    }
    test_field_compute_major();
    fn test_field_compute_minor() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).compute_minor) as usize - ptr as usize
            },
            164usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(compute_minor)
            )
        );
    }
    test_field_compute_minor();
    fn test_field_multiprocessors() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).multiprocessors) as usize - ptr as usize
            },
            168usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(multiprocessors)
            )
        );
    }
    test_field_multiprocessors();
    fn test_field_software() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_backend_desc>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).software) as usize - ptr as usize
            },
            172usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_backend_desc),
                "::",
                stringify!(software)
            )
        );
    }
    test_field_software();
}
extern "C" {
    pub fn sa_backend_count() -> i32;
}
extern "C" {
    pub fn sa_backend_info(index: i32, out: *mut sa_backend_desc) -> sa_status;
}
extern "C" {
    pub fn sa_session_save(session: *mut sa_session) -> sa_status;
}
extern "C" {
    pub fn sa_session_resume(
        model: *mut sa_model,
        params: *const sa_session_params,
        out_session: *mut *mut sa_session,
    ) -> sa_status;
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct sa_stored_session {
    pub struct_size: u32,
    pub session_id: *const ::std::os::raw::c_char,
    pub model_name: *const ::std::os::raw::c_char,
    pub model_fingerprint: u64,
    pub memory: i32,
    pub n_tokens: u64,
    pub bytes: u64,
    pub created: i64,
    pub updated: i64,
}
#[test]
fn bindgen_test_layout_sa_stored_session() {
    assert_eq!(
        ::std::mem::size_of::<sa_stored_session>(),
        72usize,
        concat!("Size of: ", stringify!(sa_stored_session))
    );
    assert_eq!(
        ::std::mem::align_of::<sa_stored_session>(),
        8usize,
        concat!("Alignment of ", stringify!(sa_stored_session))
    );
    fn test_field_struct_size() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).struct_size) as usize - ptr as usize
            },
            0usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(struct_size)
            )
        );
    }
    test_field_struct_size();
    fn test_field_session_id() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).session_id) as usize - ptr as usize
            },
            8usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(session_id)
            )
        );
    }
    test_field_session_id();
    fn test_field_model_name() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).model_name) as usize - ptr as usize
            },
            16usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(model_name)
            )
        );
    }
    test_field_model_name();
    fn test_field_model_fingerprint() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).model_fingerprint) as usize - ptr as usize
            },
            24usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(model_fingerprint)
            )
        );
    }
    test_field_model_fingerprint();
    fn test_field_memory() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).memory) as usize - ptr as usize
            },
            32usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(memory)
            )
        );
    }
    test_field_memory();
    fn test_field_n_tokens() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).n_tokens) as usize - ptr as usize
            },
            40usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(n_tokens)
            )
        );
    }
    test_field_n_tokens();
    fn test_field_bytes() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).bytes) as usize - ptr as usize
            },
            48usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(bytes)
            )
        );
    }
    test_field_bytes();
    fn test_field_created() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).created) as usize - ptr as usize
            },
            56usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(created)
            )
        );
    }
    test_field_created();
    fn test_field_updated() {
        assert_eq!(
            unsafe {
                let uninit = ::std::mem::MaybeUninit::<sa_stored_session>::uninit();
                let ptr = uninit.as_ptr();
                ::std::ptr::addr_of!((*ptr).updated) as usize - ptr as usize
            },
            64usize,
            concat!(
                "Offset of field: ",
                stringify!(sa_stored_session),
                "::",
                stringify!(updated)
            )
        );
    }
    test_field_updated();
}
pub type sa_store_list_fn = ::std::option::Option<
    unsafe extern "C" fn(
        session: *const sa_stored_session,
        user_data: *mut ::std::os::raw::c_void,
    ) -> i32,
>;
extern "C" {
    pub fn sa_store_list(
        path: *const ::std::os::raw::c_char,
        callback: sa_store_list_fn,
        user_data: *mut ::std::os::raw::c_void,
    ) -> sa_status;
}
extern "C" {
    pub fn sa_store_delete(
        path: *const ::std::os::raw::c_char,
        session_id: *const ::std::os::raw::c_char,
    ) -> sa_status;
}

// Raw declarations of the C API in include/sa/sa.h. Every struct mirrors the C struct field by
// field (x86-64 and AArch64 layouts; the tests check the sizes the library reports). Handles
// are passed as IntPtr: the wrappers hold a SafeHandle reference across each call (see
// HandleLease), which keeps a handle from being released while the library uses it.
using System;
using System.Runtime.InteropServices;

namespace Sa
{
    internal static class NativeMethods
    {
        // "sa" resolves to libsa.so / libsa.dylib / sa.dll on .NET; Mono may also map it with a
        // <dllmap> in Sa.dll.config.
        internal const string Lib = "sa";

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int ProgressFn(UIntPtr nDone, UIntPtr nTotal, IntPtr userData);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int StoreListFn(IntPtr storedSession, IntPtr userData);

        [StructLayout(LayoutKind.Sequential)]
        internal struct ModelParams
        {
            public uint struct_size;
            public int use_mmap;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct ModelDesc
        {
            public uint struct_size;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 32)] public byte[] architecture;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 128)] public byte[] name;
            public int n_layers, n_heads, n_kv_heads, head_dim, n_embd, n_ff, n_ctx_train, n_vocab;
            public int bos_token, eos_token;
            public float rope_freq_base;
            public ulong n_params;
            public ulong weight_bytes;
            public int tokenizer_nfc;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct SessionParams
        {
            public uint struct_size;
            public int backend;
            public int n_threads;
            public int n_ctx;
            public int n_batch;
            public int memory;
            public float temperature;
            public int top_k;
            public float top_p;
            public ulong seed;
            public int n_sinks;
            public int cache_tokens;
            public int n_cascades;
            public float cascade_beta;
            public int cascade_reduction;
            public int cascade_homogeneous;
            public int sparse;
            public int page_size;
            public int budget_tokens;
            public float budget_ratio;
            public int sink_pages;
            public int local_pages;
            public int min_pages;
            public int dense_layers;
            public int select_granularity;
            public int rectify_every;
            public float vatt_epsilon;
            public float vatt_delta;
            public float vatt_pilot_ratio;
            public int vatt_topk;
            public int check_error;
            public IntPtr store_path;
            public IntPtr session_id;
            public int autosave;
            public int device;
            public int kv_type;
            public int correction;
            public int retro_window;
            public int speculation;
            public int prr_mode;
            public float prr_ratio;
            public IntPtr prr_profile;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct Stats
        {
            public uint struct_size;
            public ulong n_tokens;
            public ulong n_kv_tokens;
            public ulong kv_bytes_held;
            public ulong kv_bytes_capacity;
            public ulong kv_bytes_read_last_step;
            public ulong weight_bytes;
            public double last_call_ms;
            public ulong last_call_tokens;
            public ulong sparse_keys_attended;
            public ulong sparse_keys_total;
            public ulong n_rectified;
            public int backend;
            public int device;
            public int kv_type;
            public double retro_effective_budget;
            public double prr_hit_rate;
            public double prr_missed_pages;
            public double prr_calibration_ms;
            public double prr_ratio;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct HeadStat
        {
            public int layer, head;
            public int keys_attended;
            public int keys_total;
            public int sample_budget;
            public float rel_error;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct BackendDesc
        {
            public uint struct_size;
            public int kind;
            public int device;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 128)] public byte[] name;
            public ulong memory_bytes;
            public ulong free_bytes;
            public int compute_major;
            public int compute_minor;
            public int multiprocessors;
            public int software;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct StoredSession
        {
            public uint struct_size;
            public IntPtr session_id;
            public IntPtr model_name;
            public ulong model_fingerprint;
            public int memory;
            public ulong n_tokens;
            public ulong bytes;
            public long created;
            public long updated;
        }

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_version_number();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sa_version_string();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sa_errstr(int status);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sa_last_error();

        // Both *_params_init functions take a pointer to a buffer at least as large as the
        // library's struct (it may be newer and larger than ours); see ParamsBuffer.
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sa_model_params_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_model_load(byte[] path, ref ModelParams p, out IntPtr model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_model_load_from_memory(byte[] data, UIntPtr size, ref ModelParams p, out IntPtr model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sa_model_destroy(IntPtr model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_model_info(IntPtr model, ref ModelDesc desc);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_model_meta_string(IntPtr model, byte[] key, byte[] buf, UIntPtr capacity, out UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_tokenize(IntPtr model, byte[] text, UIntPtr textLen, uint flags, int[] tokens, UIntPtr capacity, out UIntPtr n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_token_to_piece(IntPtr model, int token, uint flags, byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_token_is_eog(IntPtr model, int token);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_detokenizer_create(IntPtr model, uint flags, out IntPtr detokenizer);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_detokenizer_push(IntPtr detokenizer, int token, byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_detokenizer_flush(IntPtr detokenizer, byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sa_detokenizer_destroy(IntPtr detokenizer);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sa_session_params_init(IntPtr p);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_create(IntPtr model, ref SessionParams p, out IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_resume(IntPtr model, ref SessionParams p, out IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void sa_session_destroy(IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sa_session_errmsg(IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_prefill(IntPtr session, int[] tokens, UIntPtr n, ProgressFn progress, IntPtr userData);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_sample(IntPtr session, out int token);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_decode_step(IntPtr session, int tokenIn, out int token);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl, EntryPoint = "sa_decode_step")]
        internal static extern int sa_decode_step_append(IntPtr session, int tokenIn, IntPtr nullOut);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr sa_session_logits(IntPtr session, out int nVocab);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_tokens(IntPtr session, out IntPtr tokens, out UIntPtr n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_reset(IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_stats(IntPtr session, ref Stats stats);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_memory_positions(IntPtr session, int layer, int kvHead, [Out] ulong[] positions, UIntPtr capacity, out UIntPtr n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_head_stats(IntPtr session, [Out] HeadStat[] stats, UIntPtr capacity, out UIntPtr n);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_session_save(IntPtr session);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_backend_count();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_backend_info(int index, ref BackendDesc desc);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_store_list(byte[] path, StoreListFn callback, IntPtr userData);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int sa_store_delete(byte[] path, byte[] sessionId);
    }
}

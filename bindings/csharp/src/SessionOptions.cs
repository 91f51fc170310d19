using System;
using System.Runtime.InteropServices;

namespace Sa
{
    /// <summary>Compute backend (SA_BACKEND_*).</summary>
    public enum Backend { Auto = 0, Cpu = 1, Cuda = 2, Vulkan = 3 }

    /// <summary>Element type of the KV cache (SA_KV_*).</summary>
    public enum KvType { Default = 0, F32 = 1, F16 = 2, BF16 = 3 }

    /// <summary>KV memory kind (SA_MEMORY_*). Full is Dense under the sparse methods' name.</summary>
    public enum MemoryKind { Dense = 0, Full = 0, Streaming = 1, Cascade = 2 }

    /// <summary>Query-aware page sparsity over the full memory (SA_SPARSE_*).</summary>
    public enum SparseMethod { None = 0, Quest = 1, VAttention = 2, Oracle = 3 }

    /// <summary>Who ranks pages under GQA (SA_SELECT_*).</summary>
    public enum SelectGranularity { PerHead = 0, PerGroup = 1 }

    /// <summary>vAttention's deterministic top-k (SA_TOPK_*).</summary>
    public enum VAttentionTopK { Quest = 0, Oracle = 1 }

    /// <summary>Correction of past decode outputs (SA_CORRECTION_*).</summary>
    public enum Correction { None = 0, Retro = 1 }

    /// <summary>Speculative selection (SA_SPECULATION_*).</summary>
    public enum Speculation { None = 0, Prr = 1 }

    /// <summary>PRR output (SA_PRR_*).</summary>
    public enum PrrMode { Superset = 0, Strict = 1 }

    /// <summary>How the cascade reduces a GQA group's attention (SA_CASCADE_REDUCE_*).</summary>
    public enum CascadeReduction { Max = 0, Mean = 1, Median = 2, None = 3 }

    /// <summary>When a session with a store saves by itself (SA_AUTOSAVE_*).</summary>
    public enum Autosave { Off = 0, Prefill = 1, Always = 2 }

    /// <summary>Settings of a session (sa_session_params). A new instance holds the library's
    /// defaults (from sa_session_params_init); see sa.h for each setting's range and
    /// meaning.</summary>
    public sealed class SessionOptions
    {
        NativeMethods.SessionParams p;

        public SessionOptions()
        {
            using (ParamsBuffer b = new ParamsBuffer())
            {
                NativeMethods.sa_session_params_init(b.Pointer);
                p = (NativeMethods.SessionParams)Marshal.PtrToStructure(b.Pointer, typeof(NativeMethods.SessionParams));
            }
            p.struct_size = (uint)Marshal.SizeOf(typeof(NativeMethods.SessionParams));
            p.store_path = IntPtr.Zero;
            p.session_id = IntPtr.Zero;
            p.prr_profile = IntPtr.Zero;
        }

        /// <summary>A copy of these settings.</summary>
        public SessionOptions Clone()
        {
            SessionOptions o = (SessionOptions)MemberwiseClone();
            return o;
        }

        public Backend Backend { get { return (Backend)p.backend; } set { p.backend = (int)value; } }
        /// <summary>Index among the devices of the chosen backend (0 with Auto).</summary>
        public int Device { get { return p.device; } set { p.device = value; } }
        /// <summary>CPU threads; 0 = one per core.</summary>
        public int Threads { get { return p.n_threads; } set { p.n_threads = value; } }
        /// <summary>Most tokens the session holds (dense/full memory); 0 = trained context.</summary>
        public int ContextSize { get { return p.n_ctx; } set { p.n_ctx = value; } }
        /// <summary>Prefill chunk in tokens (and progress granularity); 0 = 256.</summary>
        public int BatchSize { get { return p.n_batch; } set { p.n_batch = value; } }
        public MemoryKind Memory { get { return (MemoryKind)p.memory; } set { p.memory = (int)value; } }
        public KvType KvType { get { return (KvType)p.kv_type; } set { p.kv_type = (int)value; } }

        // Sampling
        /// <summary>0 = greedy.</summary>
        public float Temperature { get { return p.temperature; } set { p.temperature = value; } }
        /// <summary>0 = all tokens.</summary>
        public int TopK { get { return p.top_k; } set { p.top_k = value; } }
        /// <summary>1 = all tokens.</summary>
        public float TopP { get { return p.top_p; } set { p.top_p = value; } }
        public ulong Seed { get { return p.seed; } set { p.seed = value; } }

        // Bounded memories
        public int Sinks { get { return p.n_sinks; } set { p.n_sinks = value; } }
        /// <summary>Streaming/cascade cache size in tokens, sinks included; 0 = trained context.</summary>
        public int CacheTokens { get { return p.cache_tokens; } set { p.cache_tokens = value; } }
        public int Cascades { get { return p.n_cascades; } set { p.n_cascades = value; } }
        public float CascadeBeta { get { return p.cascade_beta; } set { p.cascade_beta = value; } }
        public CascadeReduction CascadeReduction { get { return (CascadeReduction)p.cascade_reduction; } set { p.cascade_reduction = (int)value; } }
        public bool CascadeHomogeneous { get { return p.cascade_homogeneous != 0; } set { p.cascade_homogeneous = value ? 1 : 0; } }

        // Query-aware sparsity
        public SparseMethod Sparse { get { return (SparseMethod)p.sparse; } set { p.sparse = (int)value; } }
        public int PageSize { get { return p.page_size; } set { p.page_size = value; } }
        /// <summary>Tokens attended per head and step; 0 = use BudgetRatio.</summary>
        public int BudgetTokens { get { return p.budget_tokens; } set { p.budget_tokens = value; } }
        public float BudgetRatio { get { return p.budget_ratio; } set { p.budget_ratio = value; } }
        public int SinkPages { get { return p.sink_pages; } set { p.sink_pages = value; } }
        public int LocalPages { get { return p.local_pages; } set { p.local_pages = value; } }
        public int MinPages { get { return p.min_pages; } set { p.min_pages = value; } }
        public int DenseLayers { get { return p.dense_layers; } set { p.dense_layers = value; } }
        public SelectGranularity SelectGranularity { get { return (SelectGranularity)p.select_granularity; } set { p.select_granularity = (int)value; } }
        /// <summary>ReSA rectification period in decode steps; 0 = never.</summary>
        public int RectifyEvery { get { return p.rectify_every; } set { p.rectify_every = value; } }
        public float VAttentionEpsilon { get { return p.vatt_epsilon; } set { p.vatt_epsilon = value; } }
        public float VAttentionDelta { get { return p.vatt_delta; } set { p.vatt_delta = value; } }
        public float VAttentionPilotRatio { get { return p.vatt_pilot_ratio; } set { p.vatt_pilot_ratio = value; } }
        public VAttentionTopK VAttentionTopK { get { return (VAttentionTopK)p.vatt_topk; } set { p.vatt_topk = (int)value; } }
        /// <summary>Every sparse head also runs dense attention and records its error
        /// (Session.GetHeadStats).</summary>
        public bool CheckError { get { return p.check_error != 0; } set { p.check_error = value ? 1 : 0; } }
        public Correction Correction { get { return (Correction)p.correction; } set { p.correction = (int)value; } }
        public int RetroWindow { get { return p.retro_window; } set { p.retro_window = value; } }
        public Speculation Speculation { get { return (Speculation)p.speculation; } set { p.speculation = (int)value; } }
        public PrrMode PrrMode { get { return (PrrMode)p.prr_mode; } set { p.prr_mode = (int)value; } }
        public float PrrRatio { get { return p.prr_ratio; } set { p.prr_ratio = value; } }
        /// <summary>A profile file that sa-bench gpu prr-profile wrote, from which PRR takes r per
        /// attention bucket instead of PrrRatio; null = none. Needs Speculation.Prr and a profile
        /// in the file for this model, device and selection settings. Read when the session is
        /// created or resumed; unlike the other PRR settings, Session.Resume takes it too.</summary>
        public string PrrProfile { get; set; }

        // Session store
        /// <summary>SQLite file the session is saved in; null = none.</summary>
        public string StorePath { get; set; }
        /// <summary>The session's name in the store (1..1024 bytes).</summary>
        public string SessionId { get; set; }
        public Autosave Autosave { get { return (Autosave)p.autosave; } set { p.autosave = (int)value; } }

        /// <summary>The native struct with the strings in memory from AllocHGlobal that the
        /// caller frees with FreeStrings (the library copies them during the call).</summary>
        internal NativeMethods.SessionParams ToNative()
        {
            NativeMethods.SessionParams n = p;
            try
            {
                n.store_path = Utf8.ToHGlobal(StorePath);
                n.session_id = Utf8.ToHGlobal(SessionId);
                n.prr_profile = Utf8.ToHGlobal(PrrProfile);
            }
            catch
            {
                FreeStrings(ref n);
                throw;
            }
            return n;
        }

        internal static void FreeStrings(ref NativeMethods.SessionParams n)
        {
            if (n.store_path != IntPtr.Zero) Marshal.FreeHGlobal(n.store_path);
            if (n.session_id != IntPtr.Zero) Marshal.FreeHGlobal(n.session_id);
            if (n.prr_profile != IntPtr.Zero) Marshal.FreeHGlobal(n.prr_profile);
            n.store_path = IntPtr.Zero;
            n.session_id = IntPtr.Zero;
            n.prr_profile = IntPtr.Zero;
        }
    }
}

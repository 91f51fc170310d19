namespace Sa
{
    /// <summary>Counters of a session (sa_stats).</summary>
    public sealed class SessionStats
    {
        internal SessionStats(NativeMethods.Stats s)
        {
            TokenCount = s.n_tokens;
            KvTokenCount = s.n_kv_tokens;
            KvBytesHeld = s.kv_bytes_held;
            KvBytesCapacity = s.kv_bytes_capacity;
            KvBytesReadLastStep = s.kv_bytes_read_last_step;
            WeightBytes = s.weight_bytes;
            LastCallMilliseconds = s.last_call_ms;
            LastCallTokens = s.last_call_tokens;
            SparseKeysAttended = s.sparse_keys_attended;
            SparseKeysTotal = s.sparse_keys_total;
            RectifiedTokens = s.n_rectified;
            Backend = (Backend)s.backend;
            Device = s.device;
            KvType = (KvType)s.kv_type;
            RetroEffectiveBudget = s.retro_effective_budget;
            PrrHitRate = s.prr_hit_rate;
            PrrMissedPages = s.prr_missed_pages;
            PrrCalibrationMilliseconds = s.prr_calibration_ms;
            PrrRatio = s.prr_ratio;
        }

        public ulong TokenCount { get; private set; }
        public ulong KvTokenCount { get; private set; }
        public ulong KvBytesHeld { get; private set; }
        public ulong KvBytesCapacity { get; private set; }
        public ulong KvBytesReadLastStep { get; private set; }
        public ulong WeightBytes { get; private set; }
        public double LastCallMilliseconds { get; private set; }
        public ulong LastCallTokens { get; private set; }
        public ulong SparseKeysAttended { get; private set; }
        public ulong SparseKeysTotal { get; private set; }
        public ulong RectifiedTokens { get; private set; }
        public Backend Backend { get; private set; }
        public int Device { get; private set; }
        public KvType KvType { get; private set; }
        public double RetroEffectiveBudget { get; private set; }
        public double PrrHitRate { get; private set; }
        public double PrrMissedPages { get; private set; }
        public double PrrCalibrationMilliseconds { get; private set; }
        /// <summary>PRR: the r of the last decode step (SessionOptions.PrrRatio, or the
        /// profile's choice with SessionOptions.PrrProfile); 0 before one.</summary>
        public double PrrRatio { get; private set; }
    }

    /// <summary>What one (layer, query head) did in the last decode step (sa_head_stat).</summary>
    public struct HeadStat
    {
        internal HeadStat(NativeMethods.HeadStat h) : this()
        {
            Layer = h.layer;
            Head = h.head;
            KeysAttended = h.keys_attended;
            KeysTotal = h.keys_total;
            SampleBudget = h.sample_budget;
            RelativeError = h.rel_error;
        }

        public int Layer { get; private set; }
        public int Head { get; private set; }
        public int KeysAttended { get; private set; }
        public int KeysTotal { get; private set; }
        /// <summary>vAttention's sample size; -1 otherwise.</summary>
        public int SampleBudget { get; private set; }
        /// <summary>With CheckError the relative L2 error against dense attention; else -1.</summary>
        public float RelativeError { get; private set; }
    }

    /// <summary>A device this build can use (sa_backend_desc).</summary>
    public sealed class DeviceInfo
    {
        public Backend Kind { get; internal set; }
        public int Device { get; internal set; }
        public string Name { get; internal set; }
        public ulong MemoryBytes { get; internal set; }
        public ulong FreeBytes { get; internal set; }
        public int ComputeMajor { get; internal set; }
        public int ComputeMinor { get; internal set; }
        public int Multiprocessors { get; internal set; }
        public bool Software { get; internal set; }
        public override string ToString() { return Kind + " " + Device + ": " + Name; }
    }
}

using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Sa
{
    /// <summary>Flags of Model.Tokenize (SA_TOKENIZE_*).</summary>
    [Flags]
    public enum TokenizeFlags : uint
    {
        None = 0,
        /// <summary>Add BOS/EOS where the model's metadata asks for them.</summary>
        AddSpecial = 1,
        /// <summary>Text such as "&lt;|im_start|&gt;" becomes its control token.</summary>
        ParseSpecial = 2,
        /// <summary>Normalize the text to Unicode NFC whatever the model's metadata says.</summary>
        Nfc = 4,
        /// <summary>Never normalize: the text is tokenized exactly as given.</summary>
        NoNormalize = 8,
        /// <summary>SentencePiece vocabularies: only text at the start of the input gets the
        /// leading-space marker, not the text after each special token.</summary>
        SpmNonLegacy = 16,
    }

    /// <summary>A model description (sa_model_desc).</summary>
    public sealed class ModelInfo
    {
        public string Architecture { get; internal set; }
        public string Name { get; internal set; }
        public int LayerCount { get; internal set; }
        public int HeadCount { get; internal set; }
        public int KvHeadCount { get; internal set; }
        public int HeadDim { get; internal set; }
        public int EmbeddingSize { get; internal set; }
        public int FeedForwardSize { get; internal set; }
        public int TrainedContext { get; internal set; }
        public int VocabSize { get; internal set; }
        /// <summary>Beginning-of-sequence token, or -1.</summary>
        public int BosToken { get; internal set; }
        /// <summary>End-of-sequence token, or -1.</summary>
        public int EosToken { get; internal set; }
        public float RopeFreqBase { get; internal set; }
        public ulong ParameterCount { get; internal set; }
        public ulong WeightBytes { get; internal set; }
        /// <summary>Whether Tokenize normalizes text to Unicode NFC unless told not to
        /// (TokenizeFlags.NoNormalize); see sa_tokenize in sa.h for which models do.</summary>
        public bool TokenizerNfc { get; internal set; }
    }

    /// <summary>A loaded GGUF model (sa_model): weights and tokenizer, immutable and safe to use
    /// from any number of threads. Sessions and detokenizers made from it keep it alive, so it
    /// may be disposed before them.</summary>
    public sealed class Model : IDisposable
    {
        readonly ModelHandle handle;
        ModelInfo info;

        Model(ModelHandle h) { handle = h; }

        /// <summary>The native handle (for interop with other code).</summary>
        public ModelHandle Handle { get { return handle; } }

        /// <summary>Loads a GGUF file (sa_model_load). useMmap = false reads it into memory.</summary>
        /// <exception cref="SaException">Io, Format, Unsupported, InvalidArgument, NoMemory.</exception>
        public static Model Load(string path, bool useMmap = true)
        {
            if (path == null) throw new ArgumentNullException("path");
            NativeMethods.ModelParams p = DefaultParams();
            p.use_mmap = useMmap ? 1 : 0;
            IntPtr raw;
            int status = NativeMethods.sa_model_load(Utf8.ToNative(path), ref p, out raw);
            if (status != 0) throw SaException.FromLastError(status);
            ModelHandle h = new ModelHandle();
            h.Set(raw);
            return new Model(h);
        }

        /// <summary>Loads a GGUF model from bytes (sa_model_load_from_memory); the library copies
        /// them.</summary>
        public static Model LoadFromMemory(byte[] data)
        {
            if (data == null) throw new ArgumentNullException("data");
            NativeMethods.ModelParams p = DefaultParams();
            IntPtr raw;
            int status = NativeMethods.sa_model_load_from_memory(data, (UIntPtr)(ulong)data.Length, ref p, out raw);
            if (status != 0) throw SaException.FromLastError(status);
            ModelHandle h = new ModelHandle();
            h.Set(raw);
            return new Model(h);
        }

        static NativeMethods.ModelParams DefaultParams()
        {
            NativeMethods.ModelParams p;
            using (ParamsBuffer b = new ParamsBuffer())
            {
                NativeMethods.sa_model_params_init(b.Pointer);
                p = (NativeMethods.ModelParams)Marshal.PtrToStructure(b.Pointer, typeof(NativeMethods.ModelParams));
            }
            p.struct_size = (uint)Marshal.SizeOf(typeof(NativeMethods.ModelParams));
            return p;
        }

        internal HandleLease Lease() { return new HandleLease(handle, "Model"); }

        /// <summary>The model's description (sa_model_info); computed once.</summary>
        public ModelInfo Info
        {
            get
            {
                if (info != null) return info;
                NativeMethods.ModelDesc d = new NativeMethods.ModelDesc();
                d.struct_size = (uint)Marshal.SizeOf(typeof(NativeMethods.ModelDesc));
                using (HandleLease l = Lease())
                    SaException.Check(NativeMethods.sa_model_info(l.Pointer, ref d));
                info = new ModelInfo
                {
                    Architecture = Utf8.FromFixed(d.architecture),
                    Name = Utf8.FromFixed(d.name),
                    LayerCount = d.n_layers,
                    HeadCount = d.n_heads,
                    KvHeadCount = d.n_kv_heads,
                    HeadDim = d.head_dim,
                    EmbeddingSize = d.n_embd,
                    FeedForwardSize = d.n_ff,
                    TrainedContext = d.n_ctx_train,
                    VocabSize = d.n_vocab,
                    BosToken = d.bos_token,
                    EosToken = d.eos_token,
                    RopeFreqBase = d.rope_freq_base,
                    ParameterCount = d.n_params,
                    WeightBytes = d.weight_bytes,
                    TokenizerNfc = d.tokenizer_nfc != 0,
                };
                return info;
            }
        }

        /// <summary>A GGUF metadata value as text (sa_model_meta_string), or null when the key is
        /// absent or an array.</summary>
        public string GetMetadata(string key)
        {
            if (key == null) throw new ArgumentNullException("key");
            byte[] k = Utf8.ToNative(key);
            using (HandleLease l = Lease())
            {
                UIntPtr len;
                int status = NativeMethods.sa_model_meta_string(l.Pointer, k, null, UIntPtr.Zero, out len);
                if (status == (int)SaStatus.InvalidArgument) return null;
                if (status != 0 && status != (int)SaStatus.BufferTooSmall) throw SaException.FromLastError(status);
                byte[] buf = new byte[(int)len.ToUInt64() + 1];
                SaException.Check(NativeMethods.sa_model_meta_string(l.Pointer, k, buf, (UIntPtr)(ulong)buf.Length, out len));
                return Utf8.Decode(buf, 0, (int)len.ToUInt64());
            }
        }

        /// <summary>Splits text into tokens (sa_tokenize).</summary>
        public int[] Tokenize(string text, TokenizeFlags flags = TokenizeFlags.AddSpecial)
        {
            if (text == null) throw new ArgumentNullException("text");
            return Tokenize(Utf8.Bytes(text), flags);
        }

        /// <summary>Splits UTF-8 bytes (need not be valid UTF-8) into tokens.</summary>
        public int[] Tokenize(byte[] utf8, TokenizeFlags flags = TokenizeFlags.AddSpecial)
        {
            if (utf8 == null) throw new ArgumentNullException("utf8");
            using (HandleLease l = Lease()) return TokenOps.Tokenize(l.Pointer, utf8, flags);
        }

        /// <summary>The raw bytes one token stands for (sa_token_to_piece); may be part of a
        /// UTF-8 character.</summary>
        public byte[] TokenToPiece(int token, bool renderSpecial = false)
        {
            using (HandleLease l = Lease()) return TokenOps.Piece(l.Pointer, token, renderSpecial);
        }

        /// <summary>Whether a token ends generation (sa_token_is_eog).</summary>
        public bool IsEndOfGeneration(int token)
        {
            using (HandleLease l = Lease()) return NativeMethods.sa_token_is_eog(l.Pointer, token) != 0;
        }

        /// <summary>Tokens to text through a streaming detokenizer (invalid UTF-8 becomes
        /// U+FFFD).</summary>
        public string Detokenize(IEnumerable<int> tokens, bool renderSpecial = false)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            using (Detokenizer d = new Detokenizer(this, renderSpecial))
            {
                System.Text.StringBuilder sb = new System.Text.StringBuilder();
                foreach (int t in tokens) sb.Append(d.Push(t));
                sb.Append(d.Flush());
                return sb.ToString();
            }
        }

        /// <summary>Starts a session on this model (sa_session_create).</summary>
        public Session CreateSession(SessionOptions options = null)
        {
            return new Session(this, options);
        }

        /// <summary>Releases this handle. Sessions and detokenizers made from the model keep
        /// working until they are disposed. Calling it again does nothing.</summary>
        public void Dispose() { handle.Dispose(); }
    }

    // The model-level calls on a raw model pointer, shared by Model and Session (a session may
    // outlive its Model object's Dispose; it then reaches the model through its own handle).
    internal static class TokenOps
    {
        internal static int[] Tokenize(IntPtr model, byte[] utf8, TokenizeFlags flags)
        {
            int[] tokens = new int[utf8.Length + 4];
            for (;;)
            {
                UIntPtr n;
                int status = NativeMethods.sa_tokenize(model, utf8, (UIntPtr)(ulong)utf8.Length, (uint)flags,
                                                       tokens, (UIntPtr)(ulong)tokens.Length, out n);
                int count = (int)n.ToUInt64();
                if (status == (int)SaStatus.BufferTooSmall) { tokens = new int[count]; continue; }
                SaException.Check(status);
                if (count != tokens.Length) Array.Resize(ref tokens, count);
                return tokens;
            }
        }

        internal static byte[] Piece(IntPtr model, int token, bool renderSpecial)
        {
            byte[] buf = new byte[32];
            for (;;)
            {
                UIntPtr len;
                int status = NativeMethods.sa_token_to_piece(model, token, renderSpecial ? 1u : 0u, buf,
                                                             (UIntPtr)(ulong)buf.Length, out len);
                int n = (int)len.ToUInt64();
                if (status == (int)SaStatus.BufferTooSmall) { buf = new byte[n]; continue; }
                SaException.Check(status);
                Array.Resize(ref buf, n);
                return buf;
            }
        }
    }

    /// <summary>A zeroed unmanaged buffer larger than any version of a params struct, for the
    /// *_params_init functions (a newer library may write a larger struct than ours).</summary>
    internal sealed class ParamsBuffer : IDisposable
    {
        const int Size = 4096;
        internal IntPtr Pointer;

        internal ParamsBuffer()
        {
            Pointer = Marshal.AllocHGlobal(Size);
            for (int i = 0; i < Size; i += 8) Marshal.WriteInt64(Pointer, i, 0);
        }

        public void Dispose()
        {
            if (Pointer != IntPtr.Zero) { Marshal.FreeHGlobal(Pointer); Pointer = IntPtr.Zero; }
        }
    }
}

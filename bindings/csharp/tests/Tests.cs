// Tests of the C# bindings against the shipped model. Usage:
//   Sa.Tests.exe MODEL.gguf              run every test; prints "N passed, N failed"
//   Sa.Tests.exe --resume STORE ID N     (child process of the save/resume test)
// Expected values come from the C API called directly (class Raw), not from the wrapper.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Sa;

namespace Sa.Tests
{
    // The C API declared again, independently of the wrapper's NativeMethods.
    static class Raw
    {
        const string L = "sa";
        [DllImport(L)] public static extern int sa_version_number();
        [DllImport(L)] public static extern IntPtr sa_last_error();
        [DllImport(L)] public static extern void sa_model_params_init(IntPtr p);
        [DllImport(L)] public static extern void sa_session_params_init(IntPtr p);
        [DllImport(L)] public static extern int sa_model_load(byte[] path, IntPtr p, out IntPtr model);
        [DllImport(L)] public static extern void sa_model_destroy(IntPtr model);
        [DllImport(L)] public static extern int sa_model_info(IntPtr model, IntPtr desc);
        [DllImport(L)] public static extern int sa_tokenize(IntPtr model, byte[] text, UIntPtr len, uint flags, int[] tokens, UIntPtr cap, out UIntPtr n);
        [DllImport(L)] public static extern int sa_token_to_piece(IntPtr model, int token, uint flags, byte[] buf, UIntPtr cap, out UIntPtr len);
        [DllImport(L)] public static extern int sa_session_create(IntPtr model, IntPtr p, out IntPtr session);
        [DllImport(L)] public static extern void sa_session_destroy(IntPtr session);
        [DllImport(L)] public static extern int sa_prefill(IntPtr s, int[] tokens, UIntPtr n, IntPtr progress, IntPtr ud);
        [DllImport(L)] public static extern int sa_sample(IntPtr s, out int token);
        [DllImport(L)] public static extern int sa_decode_step(IntPtr s, int token, out int next);
        [DllImport(L)] public static extern int sa_backend_count();

        public static byte[] Z(string s) { return Encoding.UTF8.GetBytes(s + "\0"); }

        public static string LastError()
        {
            IntPtr p = sa_last_error();
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            byte[] b = new byte[n];
            Marshal.Copy(p, b, 0, n);
            return Encoding.UTF8.GetString(b);
        }

        public static IntPtr Load(string path)
        {
            IntPtr m;
            int st = sa_model_load(Z(path), IntPtr.Zero, out m);
            if (st != 0) throw new Exception("raw load failed: " + st);
            return m;
        }

        public static int[] Tokenize(IntPtr m, string text, uint flags)
        {
            byte[] b = Encoding.UTF8.GetBytes(text);
            UIntPtr n;
            sa_tokenize(m, b, (UIntPtr)b.Length, flags, null, UIntPtr.Zero, out n);
            int[] t = new int[(int)n];
            int st = sa_tokenize(m, b, (UIntPtr)b.Length, flags, t, (UIntPtr)t.Length, out n);
            if (st != 0) throw new Exception("raw tokenize failed: " + st);
            return t;
        }

        public static byte[] Piece(IntPtr m, int token)
        {
            byte[] buf = new byte[256];
            UIntPtr n;
            int st = sa_token_to_piece(m, token, 0, buf, (UIntPtr)buf.Length, out n);
            if (st != 0) throw new Exception("raw piece failed: " + st);
            byte[] r = new byte[(int)n];
            Array.Copy(buf, r, r.Length);
            return r;
        }

        // Greedy generation with the library's default session params, as sa-run does it:
        // sample, then decode steps, stopping at SA_DONE or after n tokens.
        public static int[] Greedy(IntPtr m, int[] prompt, int n)
        {
            IntPtr s;
            if (sa_session_create(m, IntPtr.Zero, out s) != 0) throw new Exception("raw session failed");
            List<int> r = new List<int>();
            try
            {
                if (sa_prefill(s, prompt, (UIntPtr)prompt.Length, IntPtr.Zero, IntPtr.Zero) != 0) throw new Exception("raw prefill failed");
                int t;
                int st = sa_sample(s, out t);
                while (st == 0 && r.Count < n)
                {
                    r.Add(t);
                    if (r.Count == n) break;
                    st = sa_decode_step(s, t, out t);
                }
                if (st != 0 && st != 1) throw new Exception("raw decode failed: " + st);
            }
            finally { sa_session_destroy(s); }
            return r.ToArray();
        }
    }

    static class Program
    {
        static int passed, failed;
        static string modelPath;
        static Model model;
        static IntPtr rawModel;
        const string Prompt = "Once upon a time";
        static int[] refPrompt, refTokens;
        static string refText;

        static void Check(bool cond, string what)
        {
            if (!cond) throw new Exception("check failed: " + what);
        }

        static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new Exception(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        static void Seq<T>(IList<T> expected, IList<T> actual, string what)
        {
            if (!expected.SequenceEqual(actual))
                throw new Exception(what + ": expected [" + string.Join(",", expected) + "], got [" + string.Join(",", actual) + "]");
        }

        static TEx Throws<TEx>(Action a, string what) where TEx : Exception
        {
            try { a(); }
            catch (TEx e) { return e; }
            catch (Exception e) { throw new Exception(what + ": expected " + typeof(TEx).Name + ", got " + e.GetType().Name + ": " + e.Message); }
            throw new Exception(what + ": expected " + typeof(TEx).Name + ", nothing thrown");
        }

        static SaException ThrowsSa(SaStatus status, Action a, string what)
        {
            SaException e = Throws<SaException>(a, what);
            Equal(status, e.Status, what + " status");
            Check(!string.IsNullOrEmpty(e.Message), what + " has a message");
            return e;
        }

        static void Run(string name, Action test)
        {
            Stopwatch w = Stopwatch.StartNew();
            try
            {
                test();
                passed++;
                Console.WriteLine("ok    {0} ({1} ms)", name, w.ElapsedMilliseconds);
            }
            catch (Exception e)
            {
                failed++;
                Console.WriteLine("FAIL  {0}: {1}", name, e);
            }
        }

        static int Main(string[] args)
        {
            if (args.Length == 4 && args[0] == "--resume") return ResumeChild(args[1], args[2], int.Parse(args[3]));
            if (args.Length != 1)
            {
                Console.Error.WriteLine("usage: Sa.Tests.exe MODEL.gguf");
                return 2;
            }
            modelPath = args[0];
            model = Model.Load(modelPath);
            rawModel = Raw.Load(modelPath);
            refPrompt = Raw.Tokenize(rawModel, Prompt, 1);
            refTokens = Raw.Greedy(rawModel, refPrompt, 24);
            List<byte> bytes = new List<byte>();
            foreach (int t in refTokens) bytes.AddRange(Raw.Piece(rawModel, t));
            refText = Encoding.UTF8.GetString(bytes.ToArray());

            Run("version", TestVersion);
            Run("struct layout", TestLayout);
            Run("model info and metadata", TestInfo);
            Run("load errors", TestLoadErrors);
            Run("load from memory", TestLoadFromMemory);
            Run("tokenize and pieces", TestTokenize);
            Run("streaming detokenizer", TestDetokenizer);
            Run("greedy generation equals the C API", TestGreedy);
            Run("misuse", TestMisuse);
            Run("use after dispose", TestDisposed);
            Run("session keeps its model alive", TestModelLifetime);
            Run("cancellation through the token", TestCancellation);
            Run("throwing progress callback", TestThrowingCallback);
            Run("dispose inside the progress callback", TestDisposeInCallback);
            Run("sessions on several threads", TestThreads);
            Run("save, resume in a second process, list, delete", TestStore);
            Run("stats and head stats", TestStats);
            Run("PRR's r: prr_ratio or a profile", TestPrr);
            Run("memory positions", TestMemoryPositions);
            Run("finalizers", TestFinalizers);

            model.Dispose();
            Raw.sa_model_destroy(rawModel);
            Console.WriteLine("{0} passed, {1} failed", passed, failed);
            return failed == 0 ? 0 : 1;
        }

        // ----------------------------------------------------------------------------------------

        static void TestVersion()
        {
            Equal(Raw.sa_version_number(), SaLibrary.VersionNumber, "version number");
            int v = SaLibrary.VersionNumber;
            Equal((v / 1000000) + "." + (v / 1000 % 1000) + "." + (v % 1000), SaLibrary.Version, "version string");
            Equal(SaLibrary.BindingsMajorVersion, v / 1000000, "major version");
            Equal("unknown status", SaLibrary.ErrorString((SaStatus)999), "errstr of an unknown code");
            Check(SaLibrary.ErrorString(SaStatus.Io).Length > 0, "errstr");
        }

        // The sizes the library writes into struct_size, and default values read at the C
        // offsets of sa_session_params (x86-64/AArch64: seed at 40, n_sinks at 48, prr_ratio at
        // 180, prr_profile at 184), against the wrapper's structs and SessionOptions.
        static void TestLayout()
        {
            IntPtr buf = Marshal.AllocHGlobal(4096);
            try
            {
                for (int i = 0; i < 4096; i++) Marshal.WriteByte(buf, i, 0);
                Raw.sa_session_params_init(buf);
                Equal(Marshal.ReadInt32(buf), Marshal.SizeOf(typeof(NativeMethods.SessionParams)), "sizeof sa_session_params");
                Equal(192, Marshal.ReadInt32(buf), "sa_session_params is 192 bytes");
                SessionOptions o = new SessionOptions();
                Equal((ulong)Marshal.ReadInt64(buf, 40), o.Seed, "seed");
                Equal(Marshal.ReadInt32(buf, 48), o.Sinks, "n_sinks");
                Equal(BitConverter.ToSingle(BitConverter.GetBytes(Marshal.ReadInt32(buf, 180)), 0), o.PrrRatio, "prr_ratio");
                Equal(184, (int)Marshal.OffsetOf(typeof(NativeMethods.SessionParams), "prr_profile"), "offset of prr_profile");
                Equal(IntPtr.Zero, Marshal.ReadIntPtr(buf, 184), "default prr_profile is NULL");
                Equal(null, o.PrrProfile, "default PrrProfile");
                Equal(64, o.Sinks, "default n_sinks");
                Equal(16, o.PageSize, "default page_size");
                Equal(1f, o.TopP, "default top_p");
                Equal(Backend.Auto, o.Backend, "default backend");

                for (int i = 0; i < 64; i++) Marshal.WriteByte(buf, i, 0);
                Raw.sa_model_params_init(buf);
                Equal(Marshal.ReadInt32(buf), Marshal.SizeOf(typeof(NativeMethods.ModelParams)), "sizeof sa_model_params");
            }
            finally { Marshal.FreeHGlobal(buf); }
            Equal(232, Marshal.SizeOf(typeof(NativeMethods.ModelDesc)), "sizeof sa_model_desc");
            Equal(152, Marshal.SizeOf(typeof(NativeMethods.Stats)), "sizeof sa_stats");
            Equal(144, (int)Marshal.OffsetOf(typeof(NativeMethods.Stats), "prr_ratio"), "offset of sa_stats.prr_ratio");
            Equal(24, Marshal.SizeOf(typeof(NativeMethods.HeadStat)), "sizeof sa_head_stat");
            Equal(176, Marshal.SizeOf(typeof(NativeMethods.BackendDesc)), "sizeof sa_backend_desc");
            Equal(72, Marshal.SizeOf(typeof(NativeMethods.StoredSession)), "sizeof sa_stored_session");
        }

        static void TestInfo()
        {
            IntPtr d = Marshal.AllocHGlobal(232);
            try
            {
                for (int i = 0; i < 232; i++) Marshal.WriteByte(d, i, 0);
                Marshal.WriteInt32(d, 232);
                Equal(0, Raw.sa_model_info(rawModel, d), "raw info");
                ModelInfo info = model.Info;
                Equal(Marshal.ReadInt32(d, 164), info.LayerCount, "n_layers");
                Equal(Marshal.ReadInt32(d, 168), info.HeadCount, "n_heads");
                Equal(Marshal.ReadInt32(d, 172), info.KvHeadCount, "n_kv_heads");
                Equal(Marshal.ReadInt32(d, 188), info.TrainedContext, "n_ctx_train");
                Equal(Marshal.ReadInt32(d, 192), info.VocabSize, "n_vocab");
                Equal(Marshal.ReadInt32(d, 196), info.BosToken, "bos");
                Equal(Marshal.ReadInt32(d, 200), info.EosToken, "eos");
                Equal((ulong)Marshal.ReadInt64(d, 208), info.ParameterCount, "n_params");
                Equal(Marshal.ReadInt32(d, 224) != 0, info.TokenizerNfc, "tokenizer_nfc");
                Check(info.TokenizerNfc, "the shipped model (pre-tokenizer qwen2) normalizes to NFC");
                Equal(Marshal.PtrToStringAnsi(new IntPtr(d.ToInt64() + 4)), info.Architecture, "architecture");
            }
            finally { Marshal.FreeHGlobal(d); }
            Equal("llama", model.GetMetadata("general.architecture"), "metadata general.architecture");
            Check(model.GetMetadata("tokenizer.chat_template").Contains("<|im_start|>"), "chat template");
            Equal(null, model.GetMetadata("no.such.key"), "absent key");
            Equal(model.Info.TrainedContext.ToString(), model.GetMetadata("llama.context_length"), "scalar metadata as text");
        }

        static void TestLoadErrors()
        {
            string dir = TempDir();
            try
            {
                string missing = Path.Combine(dir, "missing.gguf");
                SaException e = ThrowsSa(SaStatus.Io, () => Model.Load(missing), "missing file");
                IntPtr m;
                Equal(4, Raw.sa_model_load(Raw.Z(missing), IntPtr.Zero, out m), "raw status of a missing file");
                Equal(Raw.LastError(), e.Message, "the exception carries the library's message");

                string garbage = Path.Combine(dir, "garbage.gguf");
                byte[] junk = new byte[4096];
                new Random(7).NextBytes(junk);
                File.WriteAllBytes(garbage, junk);
                ThrowsSa(SaStatus.Format, () => Model.Load(garbage), "garbage file");
                ThrowsSa(SaStatus.Format, () => Model.Load(garbage, false), "garbage file, read");
                ThrowsSa(SaStatus.Format, () => Model.LoadFromMemory(junk), "garbage bytes");
                ThrowsSa(SaStatus.Format, () => Model.LoadFromMemory(new byte[0]), "empty bytes");
                byte[] truncated = File.ReadAllBytes(modelPath).Take(100000).ToArray();
                ThrowsSa(SaStatus.Format, () => Model.LoadFromMemory(truncated), "truncated model");
                Throws<ArgumentNullException>(() => Model.Load(null), "null path");
            }
            finally { Directory.Delete(dir, true); }
        }

        static void TestLoadFromMemory()
        {
            using (Model m = Model.LoadFromMemory(File.ReadAllBytes(modelPath)))
            using (Session s = m.CreateSession())
            {
                Seq(refPrompt, m.Tokenize(Prompt), "tokens");
                Equal(string.Concat(s.Generate(Prompt, 24)), refText, "generation");
            }
        }

        static void TestTokenize()
        {
            string[] texts = { "Hello world", " leading space", "héllo wörld — 世界 🙂", "a\nb\tc", "<|im_start|>user\nhi<|im_end|>", "" };
            foreach (string text in texts)
                foreach (TokenizeFlags f in new[] { TokenizeFlags.None, TokenizeFlags.AddSpecial, TokenizeFlags.ParseSpecial, TokenizeFlags.AddSpecial | TokenizeFlags.ParseSpecial })
                    Seq(Raw.Tokenize(rawModel, text, (uint)f), model.Tokenize(text, f), "tokenize '" + text + "' " + f);
            // Bytes that are not UTF-8 are tokenized as bytes.
            byte[] bad = { 0x66, 0xff, 0xfe, 0x67 };
            Check(model.Tokenize(bad, TokenizeFlags.None).Length >= 3, "invalid UTF-8 is tokenized");
            // A long text exceeds the first buffer guess? (tokens <= bytes + 4 always holds; check a
            // long one anyway.)
            string longText = string.Concat(Enumerable.Repeat("the cat sat on the mat. ", 200));
            Seq(Raw.Tokenize(rawModel, longText, 1), model.Tokenize(longText), "long text");
            for (int t = 0; t < model.Info.VocabSize; t += 97)
                Seq(Raw.Piece(rawModel, t), model.TokenToPiece(t), "piece " + t);
            Equal(0, model.TokenToPiece(model.Info.BosToken).Length, "BOS renders as nothing");
            Equal("<s>", Encoding.UTF8.GetString(model.TokenToPiece(model.Info.BosToken, true)), "BOS rendered");
            Check(model.IsEndOfGeneration(model.Info.EosToken), "EOS ends generation");
            Check(!model.IsEndOfGeneration(refPrompt[refPrompt.Length - 1]), "a word does not");
        }

        static void TestDetokenizer()
        {
            string text = "héllo wörld — 世界 🙂 naïve café";
            int[] tokens = model.Tokenize(text, TokenizeFlags.None);
            // The test means something only if some token is part of a character.
            bool split = tokens.Any(t => { byte[] p = Raw.Piece(rawModel, t); return Encoding.UTF8.GetString(p).IndexOf('\uFFFD') >= 0; });
            Check(split, "the text has tokens that split a character");
            using (Detokenizer d = new Detokenizer(model))
            {
                StringBuilder sb = new StringBuilder();
                foreach (int t in tokens)
                {
                    string s = d.Push(t);
                    Check(s.IndexOf('\uFFFD') < 0, "no replacement character in a streamed piece");
                    sb.Append(s);
                }
                sb.Append(d.Flush());
                Equal(text, sb.ToString(), "streamed text");
            }
            Equal(text, model.Detokenize(tokens), "Detokenize");
            // A lone continuation byte is held back, then flushed as U+FFFD.
            int[] bytesOfEmoji = model.Tokenize(new byte[] { 0xF0, 0x9F }, TokenizeFlags.None);
            using (Detokenizer d = new Detokenizer(model))
            {
                string s = string.Concat(bytesOfEmoji.Select(t => d.Push(t)));
                Equal("", s, "incomplete character held back");
                Check(d.Flush().IndexOf('\uFFFD') >= 0, "flushed as U+FFFD");
            }
            ThrowsSa(SaStatus.InvalidArgument, () => { using (Detokenizer d = new Detokenizer(model)) d.Push(-5); }, "bad token");
        }

        static void TestGreedy()
        {
            Check(refTokens.Length == 24, "the reference produced 24 tokens");
            using (Session s = model.CreateSession())
            {
                string text = string.Concat(s.Generate(Prompt, 24));
                Equal(refText, text, "text");
                int[] history = s.GetTokens();
                Seq(refPrompt.Concat(refTokens).ToArray(), history, "history = prompt + every generated token");
            }
            using (Session s = model.CreateSession())
            {
                s.Prefill(refPrompt);
                Seq(refTokens, s.GenerateTokens(24).ToList(), "GenerateTokens");
            }
            using (Session s = model.CreateSession())
            {
                // Sample/DecodeStep by hand, and a consumer that stops early.
                s.Prefill(refPrompt);
                bool done;
                int t = s.Sample(out done);
                Equal(refTokens[0], t, "Sample");
                t = s.DecodeStep(t, out done);
                Equal(refTokens[1], t, "DecodeStep");
                s.Reset();
                Equal(0, s.TokenCount, "reset");
                s.Prefill(refPrompt);
                foreach (int x in s.GenerateTokens()) if (s.TokenCount >= refPrompt.Length + 5) break;
                Seq(refPrompt.Concat(refTokens.Take(6)).ToArray(), s.GetTokens(), "abandoned enumeration keeps what it returned");
                Seq(model.Tokenize("<|im_end|>\n", TokenizeFlags.ParseSpecial), s.Tokenize("<|im_end|>\n", TokenizeFlags.ParseSpecial), "Session.Tokenize: no BOS after the start");
                s.Reset();
                Seq(refPrompt, s.Tokenize(Prompt), "Session.Tokenize: BOS at the start");
                s.Prefill(refPrompt);
                float[] logits = s.GetLogits();
                Equal(model.Info.VocabSize, logits.Length, "logits length");
            }
        }

        static void TestMisuse()
        {
            int vocab = model.Info.VocabSize;
            using (Session s = model.CreateSession())
            {
                ThrowsSa(SaStatus.Misuse, () => { bool d; s.Sample(out d); }, "sample before prefill");
                Equal(null, s.GetLogits(), "no logits yet");
                SaException e = ThrowsSa(SaStatus.InvalidArgument, () => s.Prefill(new[] { 1, 2, vocab }), "token = n_vocab");
                Check(e.Message.Contains("2"), "the message gives the index: " + e.Message);
                ThrowsSa(SaStatus.InvalidArgument, () => s.Prefill(new[] { -1 }), "negative token");
                Equal(0, s.TokenCount, "a failed prefill changes nothing");
                s.Prefill(refPrompt);
                ThrowsSa(SaStatus.InvalidArgument, () => { bool d; s.DecodeStep(vocab, out d); }, "decode a bad token");
                Equal(refPrompt.Length, s.TokenCount, "a failed step changes nothing");
                ThrowsSa(SaStatus.Misuse, () => s.Save(), "save without a store");
            }
            ThrowsSa(SaStatus.InvalidArgument, () => model.TokenToPiece(vocab), "piece of n_vocab");
            ThrowsSa(SaStatus.InvalidArgument, () => model.TokenToPiece(-1), "piece of -1");
            SessionOptions small = new SessionOptions { ContextSize = 8 };
            using (Session s = model.CreateSession(small))
                ThrowsSa(SaStatus.ContextFull, () => s.Prefill(Enumerable.Repeat(refPrompt[1], 20).ToArray()), "context full");
            ThrowsSa(SaStatus.InvalidArgument, () => model.CreateSession(new SessionOptions { Sparse = SparseMethod.Quest, PageSize = 5000 }), "page size out of range");
            ThrowsSa(SaStatus.InvalidArgument, () => model.CreateSession(new SessionOptions { Memory = (MemoryKind)42 }), "unknown memory");
            bool hasCuda = SaLibrary.GetDevices().Any(x => x.Kind == Backend.Cuda);
            if (!hasCuda)
                ThrowsSa(SaStatus.Unsupported, () => model.CreateSession(new SessionOptions { Backend = Backend.Cuda }), "CUDA on a machine without one");
            Throws<ArgumentOutOfRangeException>(() => { using (Session s = model.CreateSession()) s.GenerateTokens(-1); }, "negative maxTokens");
        }

        static void TestDisposed()
        {
            Session s = model.CreateSession();
            s.Prefill(refPrompt);
            s.Dispose();
            s.Dispose();
            Throws<ObjectDisposedException>(() => s.Prefill(refPrompt), "Prefill");
            Throws<ObjectDisposedException>(() => s.GetTokens(), "GetTokens");
            Throws<ObjectDisposedException>(() => s.GetStats(), "GetStats");
            Throws<ObjectDisposedException>(() => s.Generate(4).ToList(), "Generate");
            Throws<ObjectDisposedException>(() => s.GenerateTokens(4), "GenerateTokens");
            Throws<ObjectDisposedException>(() => new Detokenizer(s), "Detokenizer of a disposed session");

            Model m = Model.Load(modelPath);
            Detokenizer d = new Detokenizer(m);
            m.Dispose();
            m.Dispose();
            Throws<ObjectDisposedException>(() => m.Tokenize("x"), "Tokenize");
            Throws<ObjectDisposedException>(() => m.CreateSession(), "CreateSession");
            Throws<ObjectDisposedException>(() => new Detokenizer(m), "Detokenizer");
            Throws<ObjectDisposedException>(() => { var unused = m.Info; }, "Info");
            Equal(Encoding.UTF8.GetString(Raw.Piece(rawModel, refTokens[0])), d.Push(refTokens[0]), "a detokenizer outlives its model's Dispose");
            d.Dispose();
        }

        static void TestModelLifetime()
        {
            Model m = Model.Load(modelPath);
            Session s = m.CreateSession();
            Detokenizer d = new Detokenizer(m);
            m.Dispose();
            string text = string.Concat(s.Generate(Prompt, 24));
            Equal(refText, text, "generation after the model was disposed");
            Equal(refText, string.Concat(refTokens.Select(t => d.Push(t))) + d.Flush(), "detokenizer after the model was disposed");
            s.Dispose();
            d.Dispose();
        }

        sealed class SyncProgress : IProgress<PrefillProgress>
        {
            public readonly List<PrefillProgress> Reports = new List<PrefillProgress>();
            public Action<PrefillProgress> OnReport;
            public void Report(PrefillProgress p)
            {
                Reports.Add(p);
                if (OnReport != null) OnReport(p);
            }
        }

        static int[] LongPrompt(int n)
        {
            int[] words = model.Tokenize(" the quick brown fox jumps over the lazy dog", TokenizeFlags.None);
            List<int> r = new List<int> { model.Info.BosToken };
            while (r.Count < n) r.AddRange(words);
            return r.Take(n).ToArray();
        }

        static void TestCancellation()
        {
            int[] prompt = LongPrompt(200);
            using (Session s = model.CreateSession(new SessionOptions { BatchSize = 16 }))
            {
                CancellationTokenSource pre = new CancellationTokenSource();
                pre.Cancel();
                Throws<OperationCanceledException>(() => s.Prefill(prompt, null, pre.Token), "already cancelled");

                CancellationTokenSource cts = new CancellationTokenSource();
                SyncProgress p = new SyncProgress();
                p.OnReport = r => { if (r.Done >= 48) cts.Cancel(); };
                OperationCanceledException e = Throws<OperationCanceledException>(() => s.Prefill(prompt, p, cts.Token), "cancelled mid-prefill");
                Equal(cts.Token, e.CancellationToken, "the exception names the token");
                Equal(3, p.Reports.Count, "stopped after the chunk that cancelled");
                Equal(0, s.TokenCount, "a cancelled prefill changes nothing");
                Equal(null, s.GetLogits(), "no logits after a cancelled prefill");

                SyncProgress all = new SyncProgress();
                s.Prefill(prompt, all, new CancellationTokenSource().Token);
                Equal(13, all.Reports.Count, "one report per 16-token chunk");
                Check(all.Reports.Zip(all.Reports.Skip(1), (a, b) => a.Done < b.Done).All(x => x), "progress increases");
                Equal(200L, all.Reports.Last().Done, "done");
                Equal(200L, all.Reports.Last().Total, "total");
                Equal(200, s.TokenCount, "tokens after a full prefill");

                // Cancelling a generation: the tokens returned so far stay in the history.
                CancellationTokenSource gen = new CancellationTokenSource();
                List<int> got = new List<int>();
                Throws<OperationCanceledException>(() =>
                {
                    foreach (int t in s.GenerateTokens(100, gen.Token)) { got.Add(t); if (got.Count == 3) gen.Cancel(); }
                }, "cancelled generation");
                Equal(3, got.Count, "three tokens before the cancellation");
                Equal(203, s.TokenCount, "history keeps the returned tokens");
            }
        }

        static void TestThrowingCallback()
        {
            int[] prompt = LongPrompt(100);
            using (Session s = model.CreateSession(new SessionOptions { BatchSize = 16 }))
            {
                InvalidOperationException boom = new InvalidOperationException("boom");
                SyncProgress p = new SyncProgress();
                p.OnReport = r => { if (r.Done >= 32) throw boom; };
                InvalidOperationException e = Throws<InvalidOperationException>(() => s.Prefill(prompt, p), "callback exception");
                Check(ReferenceEquals(boom, e), "the very exception is rethrown");
                Check(e.StackTrace.Contains("TestThrowingCallback"), "its stack trace is kept");
                Equal(2, p.Reports.Count, "the throwing report stopped the prefill");
                Equal(0, s.TokenCount, "session unchanged");
                s.Prefill(prompt, new SyncProgress());
                Equal(100, s.TokenCount, "the session works afterwards");
            }
        }

        static void TestDisposeInCallback()
        {
            int[] prompt = LongPrompt(64);
            Session s = model.CreateSession(new SessionOptions { BatchSize = 16 });
            SyncProgress p = new SyncProgress();
            p.OnReport = r => { if (r.Done == 16) s.Dispose(); };
            // The native session is destroyed when the call that holds it returns.
            try { s.Prefill(prompt, p); }
            catch (ObjectDisposedException) { }
            Throws<ObjectDisposedException>(() => s.GetTokens(), "disposed after the call");
        }

        static void TestThreads()
        {
            const int n = 4;
            int[][] results = new int[n][];
            Exception[] errors = new Exception[n];
            Thread[] threads = new Thread[n];
            for (int i = 0; i < n; i++)
            {
                int k = i;
                threads[i] = new Thread(() =>
                {
                    try
                    {
                        using (Session s = model.CreateSession(new SessionOptions { Threads = 1, ContextSize = 256 }))
                        {
                            s.Prefill(model.Tokenize(Prompt));
                            results[k] = s.GenerateTokens(16).ToArray();
                            // A failing call on this thread reports this thread's message.
                            try { model.TokenToPiece(-1 - k); }
                            catch (SaException e) { if (!e.Message.Contains((-1 - k).ToString())) throw new Exception("message of another thread: " + e.Message); }
                        }
                    }
                    catch (Exception e) { errors[k] = e; }
                });
            }
            foreach (Thread t in threads) t.Start();
            foreach (Thread t in threads) t.Join();
            for (int i = 0; i < n; i++)
            {
                if (errors[i] != null) throw new Exception("thread " + i, errors[i]);
                Seq(refTokens.Take(16).ToArray(), results[i], "thread " + i);
            }

            // One session used from two threads: the calls are serialized, nothing breaks.
            using (Session s = model.CreateSession(new SessionOptions { ContextSize = 512 }))
            {
                Exception err = null;
                Thread reader = new Thread(() =>
                {
                    try { for (int i = 0; i < 200; i++) { s.GetStats(); s.GetTokens(); } }
                    catch (Exception e) { err = e; }
                });
                reader.Start();
                for (int i = 0; i < 5; i++) s.Prefill(refPrompt);
                reader.Join();
                if (err != null) throw err;
                Equal(5 * refPrompt.Length, s.TokenCount, "tokens");
            }
        }

        static void TestStore()
        {
            string dir = TempDir();
            try
            {
                string store = Path.Combine(dir, "sessions.db");
                Equal(0, SessionStore.List(store).Count, "no file, no sessions");
                ThrowsSa(SaStatus.InvalidArgument, () => Session.Resume(model, new SessionOptions { StorePath = store, SessionId = "story" }), "resume from a missing store");
                SessionOptions o = new SessionOptions { StorePath = store, SessionId = "story", ContextSize = 512 };
                bool resumed;
                int[] expected;
                int saved;
                using (Session s = Session.ResumeOrCreate(model, o, out resumed))
                {
                    Check(!resumed, "a new session");
                    s.Prefill(refPrompt);
                    s.GenerateTokens(6).ToList();
                    s.Save();
                    saved = s.TokenCount;
                    expected = s.GenerateTokens(8).ToArray();
                }
                IList<StoredSession> list = SessionStore.List(store);
                Equal(1, list.Count, "one stored session");
                Equal("story", list[0].SessionId, "id");
                Equal((ulong)saved, list[0].TokenCount, "stored tokens");
                Equal(MemoryKind.Dense, list[0].Memory, "memory");
                Equal(model.Info.Name, list[0].ModelName, "model name");
                Check(list[0].Bytes > 0, "bytes");
                Check(Math.Abs((DateTimeOffset.UtcNow - list[0].Updated).TotalMinutes) < 10, "updated is now: " + list[0].Updated);

                string output = RunChild(store, "story", 8);
                Equal(saved + ":" + string.Join(",", expected), output.Trim(), "the second process continues exactly");

                // A new session may not overwrite a stored one it did not save or resume.
                using (Session other = model.CreateSession(new SessionOptions { StorePath = store, SessionId = "story" }))
                {
                    other.Prefill(refPrompt);
                    ThrowsSa(SaStatus.Store, () => other.Save(), "id taken");
                }
                using (Session again = Session.ResumeOrCreate(model, o, out resumed))
                {
                    Check(resumed, "resumed in this process");
                    Equal(saved, again.TokenCount, "history");
                }

                File.WriteAllBytes(Path.Combine(dir, "not-a-store.db"), Encoding.ASCII.GetBytes("hello, this is not sqlite at all................................................................................................"));
                ThrowsSa(SaStatus.Store, () => SessionStore.List(Path.Combine(dir, "not-a-store.db")), "list a foreign file");

                SessionStore.Delete(store, "story");
                Equal(0, SessionStore.List(store).Count, "deleted");
                ThrowsSa(SaStatus.InvalidArgument, () => SessionStore.Delete(store, "story"), "delete twice");
                ThrowsSa(SaStatus.InvalidArgument, () => Session.Resume(model, o), "resume a deleted session");
            }
            finally { Directory.Delete(dir, true); }
        }

        // Child: resume, print "<history length>:<the next n greedy tokens>".
        static int ResumeChild(string store, string id, int n)
        {
            using (Model m = Model.Load(Environment.GetEnvironmentVariable("SA_TEST_MODEL")))
            using (Session s = Session.Resume(m, new SessionOptions { StorePath = store, SessionId = id }))
            {
                int count = s.TokenCount;
                Console.WriteLine(count + ":" + string.Join(",", s.GenerateTokens(n)));
            }
            return 0;
        }

        static string RunChild(string store, string id, int n)
        {
            string self = typeof(Program).Assembly.Location;
            string host = Process.GetCurrentProcess().MainModule.FileName;
            string name = Path.GetFileNameWithoutExtension(host).ToLowerInvariant();
            bool viaHost = name.StartsWith("mono") || name == "dotnet";
            // Under Mono or "dotnet x.dll" run the host with the assembly; an apphost runs itself.
            ProcessStartInfo psi = new ProcessStartInfo(host,
                (viaHost ? Quote(self) + " " : "") + "--resume " + Quote(store) + " " + Quote(id) + " " + n);
            psi.UseShellExecute = false;
            psi.RedirectStandardOutput = true;
            psi.EnvironmentVariables["SA_TEST_MODEL"] = modelPath;
            using (Process p = Process.Start(psi))
            {
                string output = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                Equal(0, p.ExitCode, "child exit code");
                return output;
            }
        }

        static string Quote(string s) { return "\"" + s.Replace("\"", "\\\"") + "\""; }

        static void TestMemoryPositions()
        {
            using (Session dense = model.CreateSession(new SessionOptions { ContextSize = 512 }))
            {
                dense.Prefill(refPrompt);
                ulong[] all = dense.GetMemoryPositions();
                Equal(refPrompt.Length, all.Length, "dense holds every position");
                for (int i = 0; i < all.Length; i++) Equal((ulong)i, all[i], "dense position " + i);
            }
            // 4 sinks and a cache of 12 after more tokens than that: the first 4 and the newest 8.
            int[] longer = refPrompt.Concat(refPrompt).Concat(refPrompt).ToArray();
            Check(longer.Length > 12, "the prompt overflows the window");
            SessionOptions o = new SessionOptions { Memory = MemoryKind.Streaming, Sinks = 4, CacheTokens = 12 };
            using (Session s = model.CreateSession(o))
            {
                s.Prefill(longer);
                ulong[] held = s.GetMemoryPositions(0, 0);
                ulong[] expected = Enumerable.Range(0, 4).Select(i => (ulong)i)
                    .Concat(Enumerable.Range(longer.Length - 8, 8).Select(i => (ulong)i)).ToArray();
                Check(held.SequenceEqual(expected), "streaming holds its sinks and window: " + string.Join(",", held));
                Equal(s.GetStats().KvTokenCount, (ulong)held.Length, "count equals n_kv_tokens");
                Check(s.GetMemoryPositions().SequenceEqual(expected), "the union is the same");
                try
                {
                    s.GetMemoryPositions(model.Info.LayerCount, -1);
                    Check(false, "an out-of-range layer throws");
                }
                catch (SaException e)
                {
                    Equal(SaStatus.InvalidArgument, e.Status, "out-of-range layer status");
                }
            }
        }

        static void TestStats()
        {
            using (Session s = model.CreateSession(new SessionOptions { ContextSize = 512 }))
            {
                s.Prefill(refPrompt);
                SessionStats st = s.GetStats();
                Equal((ulong)refPrompt.Length, st.TokenCount, "n_tokens");
                Equal((ulong)refPrompt.Length, st.KvTokenCount, "n_kv_tokens");
                Equal((ulong)refPrompt.Length, st.LastCallTokens, "last_call_tokens");
                Check(st.KvBytesCapacity >= st.KvBytesHeld && st.KvBytesHeld > 0, "kv bytes");
                Check(st.WeightBytes > 0, "weight bytes");
                Check(SaLibrary.GetDevices().Any(x => x.Kind == st.Backend && x.Device == st.Device), "backend is a listed device: " + st.Backend);
                Check(st.KvType != KvType.Default, "kv type resolved: " + st.KvType);
                Equal(0, s.GetHeadStats().Length, "no head stats after a prefill");
                bool d;
                s.DecodeStep(s.Sample(out d), out d);
                HeadStat[] hs = s.GetHeadStats();
                ModelInfo info = model.Info;
                Equal(info.LayerCount * info.HeadCount, hs.Length, "one record per (layer, head)");
                for (int i = 0; i < hs.Length; i++)
                {
                    Equal(i / info.HeadCount, hs[i].Layer, "layer-major");
                    Equal(i % info.HeadCount, hs[i].Head, "head");
                    Equal(refPrompt.Length + 1, hs[i].KeysTotal, "keys held");
                    Equal(hs[i].KeysTotal, hs[i].KeysAttended, "dense reads every key");
                    Equal(-1, hs[i].SampleBudget, "no sample budget");
                }
            }
            SessionOptions quest = new SessionOptions
            {
                ContextSize = 1024, Sparse = SparseMethod.Quest, PageSize = 16, BudgetTokens = 64,
                DenseLayers = 1, CheckError = true,
            };
            using (Session s = model.CreateSession(quest))
            {
                s.Prefill(LongPrompt(400));
                bool d;
                s.DecodeStep(s.Sample(out d), out d);
                SessionStats st = s.GetStats();
                Check(st.SparseKeysTotal > 0 && st.SparseKeysAttended < st.SparseKeysTotal, "sparse reads fewer keys: " + st.SparseKeysAttended + "/" + st.SparseKeysTotal);
                HeadStat[] hs = s.GetHeadStats();
                Check(hs.Where(h => h.Layer == 0).All(h => h.KeysAttended == h.KeysTotal && h.RelativeError == 0), "dense layer 0");
                Check(hs.Where(h => h.Layer >= 1).All(h => h.KeysAttended < h.KeysTotal && h.RelativeError >= 0), "sparse layers");
                ulong sum = 0;
                foreach (HeadStat h in hs) if (h.Layer >= 1) sum += (ulong)h.KeysAttended;
                Equal(st.SparseKeysAttended, sum, "stats agree with head stats");
            }
        }

        // PRR over Quest on the CPU, 4 pages of 16 per head and step, r = 0.75 without a profile.
        static SessionOptions Prr(string profile)
        {
            return new SessionOptions
            {
                Backend = Backend.Cpu, ContextSize = 1024, Sparse = SparseMethod.Quest, PageSize = 16,
                BudgetTokens = 64, Speculation = Speculation.Prr, PrrRatio = 0.75f, PrrProfile = profile,
            };
        }

        // A profile in the library's format (sa-bench gpu prr-profile writes it) for the settings
        // of Prr on the CPU, whose times let every r of its grid fit: r is the grid's largest, 2.
        static string ProfileFor(ulong fingerprint, string device)
        {
            ModelInfo i = model.Info;
            return "sa-prr-profile 1\nprofile\nmodel " + fingerprint.ToString("x16") + " heads " + i.HeadCount
                + " kv_heads " + i.KvHeadCount + " head_dim " + i.HeadDim + "\ndevice cpu " + device
                + "\nselect head page 16 budget_tokens 64 budget_ratio 0 sink 1 local 1 min 3 kv f32\n"
                + "ratios 0.5 1 2\nkeys 256 select 100 speculate 1 2 3\nkeys 4096 select 100 speculate 1 2 3\nend\n";
        }

        static void DecodeOne(Session s)
        {
            bool d;
            s.DecodeStep(s.Sample(out d), out d);
        }

        static void TestPrr()
        {
            Equal(null, new SessionOptions().PrrProfile, "no profile by default");
            int[] prompt = LongPrompt(300);
            using (Session s = model.CreateSession(Prr(null)))
            {
                s.Prefill(prompt);
                Equal(0.0, s.GetStats().PrrRatio, "0 before a decode step");
                DecodeOne(s);
                Equal(0.75, s.GetStats().PrrRatio, "the step's r is PrrRatio");
            }

            string dir = TempDir();
            try
            {
                string missing = Path.Combine(dir, "missing.prr");
                SaException e = ThrowsSa(SaStatus.Io, () => model.CreateSession(Prr(missing)), "missing profile");
                Check(e.Message.Contains("missing.prr"), "the message names the file: " + e.Message);
                // Without PRR a profile is refused before the file is looked at.
                e = ThrowsSa(SaStatus.InvalidArgument, () => model.CreateSession(new SessionOptions
                {
                    Backend = Backend.Cpu, Sparse = SparseMethod.Quest, PrrProfile = missing,
                }), "profile without PRR");
                Check(e.Message.Contains("prr_profile"), "the message names the param: " + e.Message);
                ThrowsSa(SaStatus.InvalidArgument, () => model.CreateSession(Prr("")), "empty path");
                string garbage = Path.Combine(dir, "garbage.prr");
                File.WriteAllText(garbage, "not a profile\n");
                ThrowsSa(SaStatus.Format, () => model.CreateSession(Prr(garbage)), "malformed profile");
                string other = Path.Combine(dir, "other.prr");
                File.WriteAllText(other, ProfileFor(1, "some device"));
                e = ThrowsSa(SaStatus.InvalidArgument, () => model.CreateSession(Prr(other)), "a profile of another model");
                Check(e.Message.Contains("0000000000000001"), "the message lists what the file holds: " + e.Message);

                // The profile's key: the model's fingerprint (as the store lists it) and the CPU's name.
                string store = Path.Combine(dir, "sessions.db");
                SessionOptions stored = Prr(null);
                stored.StorePath = store;
                stored.SessionId = "plain";
                using (Session s = model.CreateSession(stored))
                {
                    s.Prefill(prompt);
                    s.Save();
                }
                DeviceInfo cpu = SaLibrary.GetDevices()[0];
                Equal(Backend.Cpu, cpu.Kind, "the CPU is listed first");
                string file = Path.Combine(dir, "cpu.prr");
                File.WriteAllText(file, ProfileFor(SessionStore.List(store)[0].ModelFingerprint, cpu.Name));
                using (Session s = model.CreateSession(Prr(file)))
                {
                    s.Prefill(prompt);
                    DecodeOne(s);
                    Equal(2.0, s.GetStats().PrrRatio, "the profile's r, not PrrRatio");
                }

                // Resume takes the profile from the options: none, this one, or a missing file.
                foreach (string profile in new[] { null, file })
                {
                    using (Session s = Session.Resume(model, new SessionOptions { Backend = Backend.Cpu, StorePath = store, SessionId = "plain", PrrProfile = profile }))
                    {
                        DecodeOne(s);
                        Equal(profile == null ? 0.75 : 2.0, s.GetStats().PrrRatio, "r after resume with profile " + profile);
                    }
                }
                ThrowsSa(SaStatus.Io, () => Session.Resume(model, new SessionOptions { Backend = Backend.Cpu, StorePath = store, SessionId = "plain", PrrProfile = missing }), "resume with a missing profile");
            }
            finally { Directory.Delete(dir, true); }
        }

        // Objects dropped without Dispose, in every combination, then finalized.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference[] Abandon()
        {
            Model m = Model.Load(modelPath);
            Session s1 = m.CreateSession(new SessionOptions { ContextSize = 128 });
            s1.Prefill(refPrompt);
            Session s2 = m.CreateSession(new SessionOptions { ContextSize = 128 });
            Detokenizer d1 = new Detokenizer(m);
            Detokenizer d2 = new Detokenizer(s1);
            d2.Push(refTokens[0]);
            IEnumerator<string> unfinished = s1.Generate(10).GetEnumerator();
            unfinished.MoveNext();
            return new[] { new WeakReference(m), new WeakReference(s1), new WeakReference(s2), new WeakReference(d1), new WeakReference(d2) };
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static WeakReference AbandonAfterModelDispose()
        {
            Model m = Model.Load(modelPath);
            Session s = m.CreateSession(new SessionOptions { ContextSize = 128 });
            m.Dispose();
            s.Prefill(refPrompt);
            return new WeakReference(s);
        }

        static void TestFinalizers()
        {
            List<WeakReference> refs = new List<WeakReference>();
            for (int i = 0; i < 3; i++)
            {
                refs.AddRange(Abandon());
                refs.Add(AbandonAfterModelDispose());
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            int alive = refs.Count(r => r.IsAlive);
            Check(alive <= 2, alive + " of " + refs.Count + " objects still alive"); // conservative stack scanning may pin a few
            // The library still works.
            using (Session s = model.CreateSession(new SessionOptions { ContextSize = 128 }))
            {
                s.Prefill(refPrompt);
                Seq(refTokens.Take(4).ToArray(), s.GenerateTokens(4).ToArray(), "generation after finalization");
            }
        }

        static string TempDir()
        {
            string d = Path.Combine(Path.GetTempPath(), "sa-cs-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(d);
            return d;
        }
    }
}

using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Sa
{
    /// <summary>Progress of a prefill: tokens done so far and the total of the call.</summary>
    public struct PrefillProgress
    {
        public PrefillProgress(long done, long total) : this() { Done = done; Total = total; }
        public long Done { get; private set; }
        public long Total { get; private set; }
        public override string ToString() { return Done + "/" + Total; }
    }

    /// <summary>One conversation on a model (sa_session): token history, KV memory and sampler.
    /// Calls on one session are serialized by a lock (the library wants one thread at a time);
    /// different sessions run concurrently, also on one model. After Dispose every member throws
    /// ObjectDisposedException. The session keeps its model alive.</summary>
    public sealed class Session : IDisposable
    {
        readonly SessionHandle handle = new SessionHandle();
        readonly Model model;
        readonly object sync = new object();

        /// <summary>Starts a new session (sa_session_create); null options = defaults.</summary>
        public Session(Model model, SessionOptions options = null) : this(model, options, false) { }

        Session(Model model, SessionOptions options, bool resume)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (options == null) options = new SessionOptions();
            this.model = model;
            NativeMethods.SessionParams p = options.ToNative();
            int status;
            try
            {
                status = handle.Create(model.Handle, delegate(IntPtr m, IntPtr[] result)
                {
                    IntPtr raw;
                    int st = resume ? NativeMethods.sa_session_resume(m, ref p, out raw)
                                    : NativeMethods.sa_session_create(m, ref p, out raw);
                    result[0] = raw;
                    // Read on this thread, right after the failing call.
                    if (st != 0) lastError = SaException.FromLastError(st);
                    return st;
                });
            }
            catch (ObjectDisposedException)
            {
                throw new ObjectDisposedException("Model");
            }
            finally
            {
                SessionOptions.FreeStrings(ref p);
            }
            if (status != 0) throw lastError;
        }

        [ThreadStatic] static SaException lastError;

        /// <summary>Re-creates a session saved in a store (sa_session_resume); options names it
        /// with StorePath and SessionId and supplies Backend, Device, Threads, Autosave and
        /// PrrProfile; every other setting is the stored session's.</summary>
        /// <exception cref="SaException">InvalidArgument when there is no such file or session;
        /// Store for a foreign, newer or corrupt store or another model.</exception>
        public static Session Resume(Model model, SessionOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            return new Session(model, options, true);
        }

        /// <summary>Resumes the stored session options names, or starts a new one when the store
        /// or the session does not exist.</summary>
        public static Session ResumeOrCreate(Model model, SessionOptions options, out bool resumed)
        {
            if (options == null) throw new ArgumentNullException("options");
            try
            {
                Session s = new Session(model, options, true);
                resumed = true;
                return s;
            }
            catch (SaException e)
            {
                if (e.Status != SaStatus.InvalidArgument) throw;
            }
            resumed = false;
            return new Session(model, options, false);
        }

        /// <summary>The native handle (for interop with other code).</summary>
        public SessionHandle Handle { get { return handle; } }

        /// <summary>The model this session runs (it may have been disposed: the session keeps
        /// the native model alive regardless).</summary>
        public Model Model { get { return model; } }

        HandleLease Lease() { return new HandleLease(handle, "Session"); }

        SaException Error(IntPtr s, int status)
        {
            return new SaException((SaStatus)status, Utf8.FromNative(NativeMethods.sa_session_errmsg(s)));
        }

        // ----- prefill -------------------------------------------------------------------------

        sealed class ProgressState
        {
            internal IProgress<PrefillProgress> Progress;
            internal CancellationToken Token;
            internal Exception Error;
        }

        // One delegate for every call, rooted by this static field; the per-call state travels
        // through user_data as a GCHandle. No exception leaves the callback.
        static readonly NativeMethods.ProgressFn ProgressThunk = OnProgress;

        static int OnProgress(UIntPtr done, UIntPtr total, IntPtr userData)
        {
            ProgressState st = null;
            try
            {
                st = (ProgressState)GCHandle.FromIntPtr(userData).Target;
                if (st.Progress != null)
                    st.Progress.Report(new PrefillProgress((long)done.ToUInt64(), (long)total.ToUInt64()));
                return st.Token.IsCancellationRequested ? 1 : 0;
            }
            catch (Exception e)
            {
                if (st != null) st.Error = e;
                return 1;
            }
        }

        /// <summary>Appends tokens and computes the logits after the last one (sa_prefill). The
        /// tokens run in chunks of BatchSize; after each chunk progress is reported and the
        /// token is checked. On any failure the session is as before the call.</summary>
        /// <exception cref="OperationCanceledException">cancellationToken was cancelled.</exception>
        /// <exception cref="SaException">ContextFull, InvalidArgument (a token out of range), ...</exception>
        /// <remarks>An exception thrown by progress.Report cancels the prefill and is rethrown
        /// here. Progress&lt;T&gt; posts to the captured synchronization context; for reports
        /// on the calling thread implement IProgress&lt;T&gt; directly.</remarks>
        public void Prefill(int[] tokens, IProgress<PrefillProgress> progress = null,
                            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            cancellationToken.ThrowIfCancellationRequested();
            ProgressState state = new ProgressState { Progress = progress, Token = cancellationToken };
            bool callback = progress != null || cancellationToken.CanBeCanceled;
            GCHandle gch = callback ? GCHandle.Alloc(state) : default(GCHandle);
            try
            {
                lock (sync)
                {
                    using (HandleLease l = Lease())
                    {
                        int status = NativeMethods.sa_prefill(l.Pointer, tokens, (UIntPtr)(ulong)tokens.Length,
                                                              callback ? ProgressThunk : null,
                                                              callback ? GCHandle.ToIntPtr(gch) : IntPtr.Zero);
                        if (status == 0) return;
                        if (state.Error != null) ExceptionDispatchInfo.Capture(state.Error).Throw();
                        if (status == (int)SaStatus.Cancelled && cancellationToken.IsCancellationRequested)
                            throw new OperationCanceledException(cancellationToken);
                        throw Error(l.Pointer, status);
                    }
                }
            }
            finally
            {
                if (gch.IsAllocated) gch.Free();
                GC.KeepAlive(state);
            }
        }

        // ----- decoding ------------------------------------------------------------------------

        /// <summary>Draws the next token from the current logits (sa_sample). endOfGeneration is
        /// true when it ends generation.</summary>
        /// <exception cref="SaException">Misuse when nothing was prefilled.</exception>
        public int Sample(out bool endOfGeneration)
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int t;
                    int status = NativeMethods.sa_sample(l.Pointer, out t);
                    if (status != 0 && status != (int)SaStatus.Done) throw Error(l.Pointer, status);
                    endOfGeneration = status == (int)SaStatus.Done;
                    return t;
                }
        }

        /// <summary>Appends token, computes the logits after it and samples the next token
        /// (sa_decode_step).</summary>
        public int DecodeStep(int token, out bool endOfGeneration)
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int t;
                    int status = NativeMethods.sa_decode_step(l.Pointer, token, out t);
                    if (status != 0 && status != (int)SaStatus.Done) throw Error(l.Pointer, status);
                    endOfGeneration = status == (int)SaStatus.Done;
                    return t;
                }
        }

        /// <summary>Appends one token without sampling (sa_decode_step with out_token NULL).</summary>
        public void Append(int token)
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int status = NativeMethods.sa_decode_step_append(l.Pointer, token, IntPtr.Zero);
                    if (status != 0 && status != (int)SaStatus.Done) throw Error(l.Pointer, status);
                }
        }

        /// <summary>Tokenizes text with this session's model (usable after the Model object was
        /// disposed). AddSpecial (BOS) is added while the history is empty; flags are added to
        /// it (e.g. ParseSpecial for chat-template markers).</summary>
        public int[] Tokenize(string text, TokenizeFlags flags = TokenizeFlags.None)
        {
            if (text == null) throw new ArgumentNullException("text");
            byte[] utf8 = Utf8.Bytes(text);
            lock (sync)
                using (HandleLease l = Lease())
                {
                    if (TokenCountCore(l.Pointer) == 0) flags |= TokenizeFlags.AddSpecial;
                    return TokenOps.Tokenize(handle.ModelPointer, utf8, flags);
                }
        }

        /// <summary>Samples and decodes up to maxTokens tokens, lazily, stopping before an
        /// end-of-generation token (which is not returned and not appended). Every token
        /// returned is appended to the history, also the last one (one extra decode step) and one
        /// returned before the enumeration is abandoned or cancelled, so the history always ends
        /// with the text the caller saw. Needs logits: prefill first.</summary>
        public IEnumerable<int> GenerateTokens(int maxTokens = int.MaxValue,
                                               CancellationToken cancellationToken = default(CancellationToken))
        {
            if (maxTokens < 0) throw new ArgumentOutOfRangeException("maxTokens");
            ThrowIfDisposed();
            return GenerateTokensIterator(maxTokens, cancellationToken);
        }

        IEnumerable<int> GenerateTokensIterator(int maxTokens, CancellationToken ct)
        {
            if (maxTokens == 0) yield break;
            ct.ThrowIfCancellationRequested();
            bool done;
            int t = Sample(out done);
            int n = 0;
            bool pending = false; // t was returned but is not in the history yet
            try
            {
                while (!done)
                {
                    pending = true;
                    yield return t;
                    n++;
                    if (n >= maxTokens || ct.IsCancellationRequested)
                    {
                        pending = false;
                        Append(t);
                        ct.ThrowIfCancellationRequested();
                        yield break;
                    }
                    pending = false;
                    t = DecodeStep(t, out done);
                }
            }
            finally
            {
                // The caller stopped early (break, or an exception in its loop body).
                if (pending)
                {
                    try { Append(t); }
                    catch (SaException) { }
                    catch (ObjectDisposedException) { }
                }
            }
        }

        /// <summary>As GenerateTokens, as text: the pieces pass through a streaming detokenizer,
        /// so every string is whole UTF-8 characters (empty strings are skipped).</summary>
        public IEnumerable<string> Generate(int maxTokens = int.MaxValue,
                                           CancellationToken cancellationToken = default(CancellationToken))
        {
            IEnumerable<int> tokens = GenerateTokens(maxTokens, cancellationToken);
            return TextIterator(tokens);
        }

        /// <summary>Tokenizes prompt as Tokenize(prompt, flags) does (BOS when the history is
        /// empty), prefills it at once, then generates lazily as Generate(maxTokens).</summary>
        public IEnumerable<string> Generate(string prompt, int maxTokens = int.MaxValue,
                                           CancellationToken cancellationToken = default(CancellationToken),
                                           TokenizeFlags flags = TokenizeFlags.None)
        {
            if (prompt == null) throw new ArgumentNullException("prompt");
            Prefill(Tokenize(prompt, flags), null, cancellationToken);
            return Generate(maxTokens, cancellationToken);
        }

        IEnumerable<string> TextIterator(IEnumerable<int> tokens)
        {
            using (Detokenizer d = new Detokenizer(this))
            {
                foreach (int t in tokens)
                {
                    string s = d.Push(t);
                    if (s.Length > 0) yield return s;
                }
                string tail = d.Flush();
                if (tail.Length > 0) yield return tail;
            }
        }

        // ----- state ---------------------------------------------------------------------------

        /// <summary>A copy of the logits after the last processed token, or null when none were
        /// computed yet.</summary>
        public float[] GetLogits()
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int n;
                    IntPtr p = NativeMethods.sa_session_logits(l.Pointer, out n);
                    if (p == IntPtr.Zero) return null;
                    float[] r = new float[n];
                    Marshal.Copy(p, r, 0, n);
                    return r;
                }
        }

        /// <summary>A copy of the token history (sa_session_tokens).</summary>
        public int[] GetTokens()
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    IntPtr p;
                    UIntPtr n;
                    int status = NativeMethods.sa_session_tokens(l.Pointer, out p, out n);
                    if (status != 0) throw Error(l.Pointer, status);
                    int[] r = new int[(int)n.ToUInt64()];
                    if (r.Length > 0) Marshal.Copy(p, r, 0, r.Length);
                    return r;
                }
        }

        /// <summary>Tokens in the history.</summary>
        public int TokenCount
        {
            get
            {
                lock (sync)
                    using (HandleLease l = Lease()) return TokenCountCore(l.Pointer);
            }
        }

        static int TokenCountCore(IntPtr s)
        {
            IntPtr p;
            UIntPtr n;
            SaException.Check(NativeMethods.sa_session_tokens(s, out p, out n));
            return (int)n.ToUInt64();
        }

        /// <summary>Forgets every token (sa_session_reset).</summary>
        public void Reset()
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int status = NativeMethods.sa_session_reset(l.Pointer);
                    if (status != 0) throw Error(l.Pointer, status);
                }
        }

        /// <summary>Counters of the session (sa_session_stats).</summary>
        public SessionStats GetStats()
        {
            NativeMethods.Stats s = new NativeMethods.Stats();
            s.struct_size = (uint)Marshal.SizeOf(typeof(NativeMethods.Stats));
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int status = NativeMethods.sa_session_stats(l.Pointer, ref s);
                    if (status != 0) throw Error(l.Pointer, status);
                }
            return new SessionStats(s);
        }

        /// <summary>The history positions whose K/V the memory holds, ascending, for one layer
        /// and KV head; -1 for the union over layers or heads (sa_session_memory_positions).
        /// Dense memory holds every position; streaming and cascade what they have not evicted.</summary>
        /// <exception cref="SaException">InvalidArgument: layer or kvHead out of range.</exception>
        public ulong[] GetMemoryPositions(int layer = -1, int kvHead = -1)
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    UIntPtr n;
                    int status = NativeMethods.sa_session_memory_positions(l.Pointer, layer, kvHead, null, UIntPtr.Zero, out n);
                    if (status != 0 && status != (int)SaStatus.BufferTooSmall) throw Error(l.Pointer, status);
                    ulong[] positions = new ulong[(int)n.ToUInt64()];
                    if (positions.Length == 0) return positions;
                    status = NativeMethods.sa_session_memory_positions(l.Pointer, layer, kvHead, positions, (UIntPtr)(ulong)positions.Length, out n);
                    if (status != 0) throw Error(l.Pointer, status);
                    return positions;
                }
        }

        /// <summary>Per (layer, query head) figures of the last decode step, layer-major; empty
        /// before the first decode step and after a prefill.</summary>
        public HeadStat[] GetHeadStats()
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    UIntPtr n;
                    int status = NativeMethods.sa_session_head_stats(l.Pointer, null, UIntPtr.Zero, out n);
                    if (status != 0) throw Error(l.Pointer, status);
                    NativeMethods.HeadStat[] raw = new NativeMethods.HeadStat[(int)n.ToUInt64()];
                    if (raw.Length == 0) return new HeadStat[0];
                    status = NativeMethods.sa_session_head_stats(l.Pointer, raw, (UIntPtr)(ulong)raw.Length, out n);
                    if (status != 0) throw Error(l.Pointer, status);
                    int count = Math.Min(raw.Length, (int)n.ToUInt64());
                    HeadStat[] r = new HeadStat[count];
                    for (int i = 0; i < count; i++) r[i] = new HeadStat(raw[i]);
                    return r;
                }
        }

        /// <summary>Saves the session into its store (sa_session_save); needs StorePath and
        /// SessionId in the options it was created with.</summary>
        public void Save()
        {
            lock (sync)
                using (HandleLease l = Lease())
                {
                    int status = NativeMethods.sa_session_save(l.Pointer);
                    if (status != 0) throw Error(l.Pointer, status);
                }
        }

        void ThrowIfDisposed()
        {
            if (handle.IsDisposed) throw new ObjectDisposedException("Session");
        }

        /// <summary>Ends the session. Safe from any thread and more than once; a call in progress
        /// on another thread finishes first.</summary>
        public void Dispose() { handle.Dispose(); }
    }
}

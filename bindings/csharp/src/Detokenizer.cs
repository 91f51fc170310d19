using System;
using System.Runtime.InteropServices;

namespace Sa
{
    /// <summary>Streaming token → text (sa_detokenizer): never splits a UTF-8 character, so each
    /// returned string is complete. Use from one thread at a time.</summary>
    public sealed class Detokenizer : IDisposable
    {
        readonly DetokenizerHandle handle = new DetokenizerHandle();
        byte[] buf = new byte[256];

        /// <param name="renderSpecial">Control tokens render as their text instead of "".</param>
        public Detokenizer(Model model, bool renderSpecial = false)
        {
            if (model == null) throw new ArgumentNullException("model");
            Init(model.Handle, renderSpecial);
        }

        /// <summary>A detokenizer for the model of a session, usable after the Model object was
        /// disposed.</summary>
        public Detokenizer(Session session, bool renderSpecial = false)
        {
            if (session == null) throw new ArgumentNullException("session");
            Init(session.Handle, renderSpecial);
        }

        void Init(SaHandle owner, bool renderSpecial)
        {
            uint flags = renderSpecial ? 1u : 0u;
            int status;
            try
            {
                status = handle.Create(owner, delegate(IntPtr m, IntPtr[] result)
                {
                    IntPtr raw;
                    int st = NativeMethods.sa_detokenizer_create(m, flags, out raw);
                    result[0] = raw;
                    return st;
                });
            }
            catch (ObjectDisposedException)
            {
                throw new ObjectDisposedException(owner is ModelHandle ? "Model" : "Session");
            }
            if (status != 0) throw SaException.FromLastError(status);
        }

        public DetokenizerHandle Handle { get { return handle; } }

        /// <summary>Adds one token; returns the text that is now complete (may be "").</summary>
        public string Push(int token)
        {
            using (HandleLease l = new HandleLease(handle, "Detokenizer"))
            {
                for (;;)
                {
                    UIntPtr len;
                    int status = NativeMethods.sa_detokenizer_push(l.Pointer, token, buf, (UIntPtr)(ulong)buf.Length, out len);
                    int n = (int)len.ToUInt64();
                    if (status == (int)SaStatus.BufferTooSmall) { buf = new byte[n]; continue; }
                    SaException.Check(status);
                    return Utf8.Decode(buf, 0, n);
                }
            }
        }

        /// <summary>Returns the held-back bytes (an incomplete character becomes U+FFFD) and
        /// resets.</summary>
        public string Flush()
        {
            using (HandleLease l = new HandleLease(handle, "Detokenizer"))
            {
                for (;;)
                {
                    UIntPtr len;
                    int status = NativeMethods.sa_detokenizer_flush(l.Pointer, buf, (UIntPtr)(ulong)buf.Length, out len);
                    int n = (int)len.ToUInt64();
                    if (status == (int)SaStatus.BufferTooSmall) { buf = new byte[n]; continue; }
                    SaException.Check(status);
                    return Utf8.Decode(buf, 0, n);
                }
            }
        }

        public void Dispose() { handle.Dispose(); }
    }
}

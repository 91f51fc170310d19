using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;

namespace Sa
{
    /// <summary>One stored session (sa_stored_session).</summary>
    public sealed class StoredSession
    {
        public string SessionId { get; internal set; }
        public string ModelName { get; internal set; }
        public ulong ModelFingerprint { get; internal set; }
        public MemoryKind Memory { get; internal set; }
        public ulong TokenCount { get; internal set; }
        public ulong Bytes { get; internal set; }
        public DateTimeOffset Created { get; internal set; }
        public DateTimeOffset Updated { get; internal set; }
        public override string ToString() { return SessionId + " (" + TokenCount + " tokens)"; }
    }

    /// <summary>The SQLite session store: list and delete stored sessions. Sessions are saved with
    /// Session.Save and resumed with Session.Resume.</summary>
    public static class SessionStore
    {
        sealed class ListState
        {
            internal List<StoredSession> Items = new List<StoredSession>();
            internal Exception Error;
        }

        static readonly NativeMethods.StoreListFn ListThunk = OnItem;
        static readonly int OurSize = Marshal.SizeOf(typeof(NativeMethods.StoredSession));

        static int OnItem(IntPtr item, IntPtr userData)
        {
            ListState st = null;
            try
            {
                st = (ListState)GCHandle.FromIntPtr(userData).Target;
                // Read only the fields within the library's struct_size.
                int size = Marshal.ReadInt32(item);
                NativeMethods.StoredSession s;
                if (size >= OurSize)
                {
                    s = (NativeMethods.StoredSession)Marshal.PtrToStructure(item, typeof(NativeMethods.StoredSession));
                }
                else
                {
                    byte[] tmp = new byte[OurSize];
                    Marshal.Copy(item, tmp, 0, size);
                    GCHandle pin = GCHandle.Alloc(tmp, GCHandleType.Pinned);
                    try { s = (NativeMethods.StoredSession)Marshal.PtrToStructure(pin.AddrOfPinnedObject(), typeof(NativeMethods.StoredSession)); }
                    finally { pin.Free(); }
                }
                st.Items.Add(new StoredSession
                {
                    SessionId = Utf8.FromNative(s.session_id),
                    ModelName = Utf8.FromNative(s.model_name),
                    ModelFingerprint = s.model_fingerprint,
                    Memory = (MemoryKind)s.memory,
                    TokenCount = s.n_tokens,
                    Bytes = s.bytes,
                    Created = FromUnix(s.created),
                    Updated = FromUnix(s.updated),
                });
                return 0;
            }
            catch (Exception e)
            {
                if (st != null) st.Error = e;
                return 1;
            }
        }

        static DateTimeOffset FromUnix(long seconds)
        {
            return new DateTimeOffset(1970, 1, 1, 0, 0, 0, TimeSpan.Zero).AddSeconds(seconds);
        }

        /// <summary>The sessions of a store, most recently saved first (sa_store_list); empty
        /// when no file exists at path.</summary>
        /// <exception cref="SaException">Store: not an sa store, newer schema, corrupt.</exception>
        public static IList<StoredSession> List(string path)
        {
            if (path == null) throw new ArgumentNullException("path");
            ListState state = new ListState();
            GCHandle h = GCHandle.Alloc(state);
            try
            {
                int status = NativeMethods.sa_store_list(Utf8.ToNative(path), ListThunk, GCHandle.ToIntPtr(h));
                if (state.Error != null) ExceptionDispatchInfo.Capture(state.Error).Throw();
                if (status != 0) throw SaException.FromLastError(status);
                return state.Items;
            }
            finally
            {
                h.Free();
            }
        }

        /// <summary>Removes a stored session (sa_store_delete).</summary>
        /// <exception cref="SaException">InvalidArgument: no such file or session; Store.</exception>
        public static void Delete(string path, string sessionId)
        {
            if (path == null) throw new ArgumentNullException("path");
            if (sessionId == null) throw new ArgumentNullException("sessionId");
            int status = NativeMethods.sa_store_delete(Utf8.ToNative(path), Utf8.ToNative(sessionId));
            if (status != 0) throw SaException.FromLastError(status);
        }
    }
}

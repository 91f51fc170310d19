using System;

namespace Sa
{
    /// <summary>The library's status codes (sa_status in sa.h).</summary>
    public enum SaStatus
    {
        Ok = 0,
        /// <summary>Success, and the sampled token ends generation. Not an error.</summary>
        Done = 1,
        InvalidArgument = 2,
        Misuse = 3,
        Io = 4,
        Format = 5,
        Unsupported = 6,
        NoMemory = 7,
        Backend = 8,
        Store = 9,
        ContextFull = 10,
        Cancelled = 11,
        BufferTooSmall = 12,
        Internal = 13,
    }

    /// <summary>A failed call of the library: its status and the library's message.</summary>
    [Serializable]
    public class SaException : Exception
    {
        public SaStatus Status { get; private set; }

        public SaException(SaStatus status, string message)
            : base(string.IsNullOrEmpty(message) ? SaLibrary.ErrorString(status) : message)
        {
            Status = status;
        }

        /// <summary>An exception from the calling thread's sa_last_error().</summary>
        internal static SaException FromLastError(int status)
        {
            return new SaException((SaStatus)status, Utf8.FromNative(NativeMethods.sa_last_error()));
        }

        internal static void Check(int status)
        {
            if (status != (int)SaStatus.Ok && status != (int)SaStatus.Done) throw FromLastError(status);
        }
    }
}

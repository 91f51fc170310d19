using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Sa
{
    // UTF-8 in both directions by hand: netstandard2.0 and Mono's compiler lack some of the
    // UTF-8 marshalling attributes and Marshal.PtrToStringUTF8.
    internal static class Utf8
    {
        static readonly UTF8Encoding Strict = new UTF8Encoding(false, false);

        /// <summary>The NUL-terminated UTF-8 bytes of s (null stays null).</summary>
        internal static byte[] ToNative(string s)
        {
            if (s == null) return null;
            int n = Strict.GetByteCount(s);
            byte[] b = new byte[n + 1];
            Strict.GetBytes(s, 0, s.Length, b, 0);
            return b;
        }

        internal static byte[] Bytes(string s)
        {
            return Strict.GetBytes(s);
        }

        internal static string Decode(byte[] b, int offset, int count)
        {
            return Strict.GetString(b, offset, count);
        }

        /// <summary>A NUL-terminated UTF-8 string owned by the library, copied.</summary>
        internal static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            byte[] b = new byte[n];
            Marshal.Copy(p, b, 0, n);
            return Strict.GetString(b);
        }

        /// <summary>A NUL-terminated string in a fixed char array of a struct.</summary>
        internal static string FromFixed(byte[] b)
        {
            if (b == null) return "";
            int n = Array.IndexOf(b, (byte)0);
            return Strict.GetString(b, 0, n < 0 ? b.Length : n);
        }

        /// <summary>Copies s, NUL-terminated, into memory from AllocHGlobal (Zero for null).</summary>
        internal static IntPtr ToHGlobal(string s)
        {
            if (s == null) return IntPtr.Zero;
            byte[] b = ToNative(s);
            IntPtr p = Marshal.AllocHGlobal(b.Length);
            Marshal.Copy(b, 0, p, b.Length);
            return p;
        }
    }
}

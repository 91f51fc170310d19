using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

[assembly: InternalsVisibleTo("Sa.Tests")]

namespace Sa
{
    /// <summary>Library-wide calls: version, status text, devices.</summary>
    public static class SaLibrary
    {
        /// <summary>The major version these bindings were written for (sa.h 0.x).</summary>
        public const int BindingsMajorVersion = 0;

        /// <summary>The library's version as major*1000000 + minor*1000 + patch.</summary>
        public static int VersionNumber { get { return NativeMethods.sa_version_number(); } }

        /// <summary>The library's version, "MAJOR.MINOR.PATCH".</summary>
        public static string Version { get { return Utf8.FromNative(NativeMethods.sa_version_string()); } }

        /// <summary>A short English description of a status (sa_errstr).</summary>
        public static string ErrorString(SaStatus status)
        {
            return Utf8.FromNative(NativeMethods.sa_errstr((int)status));
        }

        /// <summary>The devices this build can use on this machine, the CPU first
        /// (sa_backend_count, sa_backend_info).</summary>
        public static DeviceInfo[] GetDevices()
        {
            int n = NativeMethods.sa_backend_count();
            DeviceInfo[] r = new DeviceInfo[n];
            for (int i = 0; i < n; i++)
            {
                NativeMethods.BackendDesc d = new NativeMethods.BackendDesc();
                d.struct_size = (uint)Marshal.SizeOf(typeof(NativeMethods.BackendDesc));
                SaException.Check(NativeMethods.sa_backend_info(i, ref d));
                r[i] = new DeviceInfo
                {
                    Kind = (Backend)d.kind,
                    Device = d.device,
                    Name = Utf8.FromFixed(d.name),
                    MemoryBytes = d.memory_bytes,
                    FreeBytes = d.free_bytes,
                    ComputeMajor = d.compute_major,
                    ComputeMinor = d.compute_minor,
                    Multiprocessors = d.multiprocessors,
                    Software = d.software != 0,
                };
            }
            return r;
        }
    }
}

using System;
using System.Runtime.InteropServices;

namespace Sa
{
    /// <summary>Base of the handles: records Dispose at once, so a disposed object refuses
    /// further use on every runtime even while a reference held by a child or by a call in
    /// progress defers the native release.</summary>
    public abstract class SaHandle : SafeHandle
    {
        volatile bool disposed;

        protected SaHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        /// <summary>Dispose was called (the native object may live on while referenced).</summary>
        public bool IsDisposed { get { return disposed || IsClosed; } }

        protected override void Dispose(bool disposing)
        {
            if (disposing) disposed = true;
            base.Dispose(disposing);
        }
    }

    /// <summary>An sa_model *. Released by sa_model_destroy once disposed or finalized and no
    /// session or detokenizer holds it any more.</summary>
    public sealed class ModelHandle : SaHandle
    {
        internal ModelHandle() { }

        internal void Set(IntPtr p) { SetHandle(p); }

        protected override bool ReleaseHandle()
        {
            NativeMethods.sa_model_destroy(handle);
            return true;
        }
    }

    /// <summary>Base of the handles made from a model. Each holds a reference
    /// (DangerousAddRef) on its owner, the ModelHandle or a session's handle, from creation until
    /// it is released, so the native model outlives every session and detokenizer whatever
    /// order they are disposed or finalized in.</summary>
    public abstract class ModelChildHandle : SaHandle
    {
        SaHandle owner;
        IntPtr model;

        protected ModelChildHandle() { }

        /// <summary>The native model pointer; valid while this handle is held.</summary>
        internal IntPtr ModelPointer { get { return model; } }

        /// <summary>Runs create(model pointer, result) with a reference held on owner; on
        /// success this handle owns result[0] and keeps the reference.</summary>
        internal int Create(SaHandle parent, Func<IntPtr, IntPtr[], int> create)
        {
            bool added = false;
            int status;
            try
            {
                if (parent.IsDisposed) throw new ObjectDisposedException(parent.GetType().Name);
                parent.DangerousAddRef(ref added);
                ModelChildHandle child = parent as ModelChildHandle;
                IntPtr m = child != null ? child.ModelPointer : parent.DangerousGetHandle();
                IntPtr[] result = new IntPtr[1];
                status = create(m, result);
                if (result[0] != IntPtr.Zero)
                {
                    owner = parent;
                    model = m;
                    SetHandle(result[0]);
                    added = false; // now owned by this handle, released in ReleaseHandle
                }
            }
            finally
            {
                if (added) parent.DangerousRelease();
            }
            return status;
        }

        protected abstract void Destroy(IntPtr p);

        protected override bool ReleaseHandle()
        {
            Destroy(handle);
            if (owner != null) owner.DangerousRelease();
            return true;
        }
    }

    /// <summary>An sa_session *.</summary>
    public sealed class SessionHandle : ModelChildHandle
    {
        internal SessionHandle() { }
        protected override void Destroy(IntPtr p) { NativeMethods.sa_session_destroy(p); }
    }

    /// <summary>An sa_detokenizer *.</summary>
    public sealed class DetokenizerHandle : ModelChildHandle
    {
        internal DetokenizerHandle() { }
        protected override void Destroy(IntPtr p) { NativeMethods.sa_detokenizer_destroy(p); }
    }

    /// <summary>Holds a reference on a SafeHandle for the length of a native call, so Dispose or
    /// the finalizer on another thread cannot release it meanwhile; throws
    /// ObjectDisposedException when it was already disposed.</summary>
    internal struct HandleLease : IDisposable
    {
        readonly SafeHandle h;
        bool added;

        internal HandleLease(SaHandle handle, string owner)
        {
            h = handle;
            added = false;
            if (handle.IsDisposed) throw new ObjectDisposedException(owner);
            try
            {
                handle.DangerousAddRef(ref added);
            }
            catch (ObjectDisposedException)
            {
                throw new ObjectDisposedException(owner);
            }
        }

        internal IntPtr Pointer { get { return h.DangerousGetHandle(); } }

        public void Dispose()
        {
            if (added) { added = false; h.DangerousRelease(); }
        }
    }
}

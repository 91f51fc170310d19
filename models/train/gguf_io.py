"""Minimal GGUF v3 writer and reader (numpy + struct), F32 / F16 / Q8_0 tensors."""
import struct
import numpy as np

GGUF_MAGIC = b"GGUF"
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
QK8_0 = 32
Q8_0_DTYPE = np.dtype([("d", "<f2"), ("qs", "i1", (QK8_0,))])  # 34 bytes per block
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}


def quantize_q8_0(x):
    """ggml's reference Q8_0: d = max|x|/127 (stored f16), q = roundf(x / d) (half away from 0)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, QK8_0)
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0).astype(np.float32)
    v = x * inv[:, None]
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    out = np.empty(x.shape[0], dtype=Q8_0_DTYPE)
    out["d"] = d.astype(np.float16)
    out["qs"] = np.clip(q, -128, 127).astype(np.int8)
    return out


def dequantize_q8_0(blocks, n):
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).reshape(-1)[:n]


def _w_str(f, s):
    b = s.encode("utf-8")
    f.write(struct.pack("<Q", len(b)))
    f.write(b)


def _w_val(f, t, v):
    if t == T_STR:
        _w_str(f, v)
    elif t == T_ARR:
        et, items = v
        f.write(struct.pack("<IQ", et, len(items)))
        if et == T_STR:
            for s in items:
                _w_str(f, s)
        else:
            f.write(np.asarray(items, dtype=np.dtype(_SCALAR[et])).tobytes())
    else:
        f.write(struct.pack(_SCALAR[t], v))


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: list of (key, type, value) (arrays: (T_ARR, (elem_type, list))).
    tensors: list of (name, np.ndarray in numpy (row-major) shape, ggml_type)."""
    blobs = []
    for name, arr, gt in tensors:
        arr = np.ascontiguousarray(arr)
        ne = list(arr.shape[::-1])  # ne[0] = fastest axis
        if gt == GGML_F32:
            data = arr.astype("<f4").tobytes()
        elif gt == GGML_F16:
            data = arr.astype("<f2").tobytes()
        elif gt == GGML_Q8_0:
            assert ne[0] % QK8_0 == 0
            data = quantize_q8_0(arr).tobytes()
        else:
            raise ValueError(gt)
        blobs.append((name, ne, gt, data))
    with open(path, "wb") as f:
        f.write(GGUF_MAGIC)
        f.write(struct.pack("<IQQ", 3, len(blobs), len(kvs)))
        for k, t, v in kvs:
            _w_str(f, k)
            f.write(struct.pack("<I", t))
            _w_val(f, t, v)
        off = 0
        offs = []
        for name, ne, gt, data in blobs:
            _w_str(f, name)
            f.write(struct.pack("<I", len(ne)))
            f.write(struct.pack(f"<{len(ne)}Q", *ne))
            f.write(struct.pack("<IQ", gt, off))
            offs.append(off)
            off += len(data)
            off = (off + alignment - 1) // alignment * alignment
        pad = (-f.tell()) % alignment
        f.write(b"\0" * pad)
        start = f.tell()
        for (name, ne, gt, data), o in zip(blobs, offs):
            f.write(b"\0" * (start + o - f.tell()))
            f.write(data)


class _R:
    def __init__(self, buf):
        self.b, self.p = buf, 0

    def get(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def str(self):
        n = self.get("<Q")
        s = self.b[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def val(self, t):
        if t == T_STR:
            return self.str()
        if t == T_ARR:
            et, n = self.get("<IQ")
            if et == T_STR:
                return [self.str() for _ in range(n)]
            dt = np.dtype(_SCALAR[et])
            a = np.frombuffer(self.b, dtype=dt, count=n, offset=self.p)
            self.p += n * dt.itemsize
            return a.tolist()
        return self.get(_SCALAR[t])


def read_gguf(path):
    """Returns (kv dict, {name: float32 numpy array in numpy shape}, {name: ggml type})."""
    with open(path, "rb") as fh:
        buf = fh.read()
    r = _R(buf)
    assert buf[:4] == GGUF_MAGIC, "not a GGUF file"
    r.p = 4
    ver, nt, nkv = r.get("<IQQ")
    assert ver == 3
    kv = {}
    for _ in range(nkv):
        k = r.str()
        t = r.get("<I")
        kv[k] = r.val(t)
    infos = []
    for _ in range(nt):
        name = r.str()
        nd = r.get("<I")
        ne = [r.get("<Q") for _ in range(nd)]
        gt, off = r.get("<IQ")
        infos.append((name, ne, gt, off))
    al = kv.get("general.alignment", 32)
    start = (r.p + al - 1) // al * al
    tensors, types = {}, {}
    for name, ne, gt, off in infos:
        n = int(np.prod(ne))
        shape = ne[::-1]
        o = start + off
        if gt == GGML_F32:
            a = np.frombuffer(buf, "<f4", n, o).astype(np.float32)
        elif gt == GGML_F16:
            a = np.frombuffer(buf, "<f2", n, o).astype(np.float32)
        elif gt == GGML_Q8_0:
            a = dequantize_q8_0(np.frombuffer(buf, Q8_0_DTYPE, n // QK8_0, o), n)
        else:
            raise ValueError(f"unsupported tensor type {gt} for {name}")
        tensors[name] = a.reshape(shape)
        types[name] = gt
    return kv, tensors, types

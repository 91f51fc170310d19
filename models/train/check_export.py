"""Check the export: the training module's forward vs the GGUF-only reference.

Usage: python3 models/train/check_export.py --ckpt models/train/ckpt/model.pt \
          --tokenizer models/train/data/tokenizer.json --f16 models/sa-default-f16.gguf
Exports a temporary F32 GGUF (must agree to ~1e-6: proves layout, RoPE pairing, GQA mapping)
and compares the F16 file too (differs only by F16 weight rounding).
"""
import argparse, os, tempfile
import torch
from train import Model, Config
from export_gguf import export
from reference import RefModel

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", default="models/train/ckpt/model.pt")
ap.add_argument("--tokenizer", default="models/train/data/tokenizer.json")
ap.add_argument("--f16", default="models/sa-default-f16.gguf")
a = ap.parse_args()
ck = torch.load(a.ckpt, map_location="cpu")
m = Model(Config(**ck["config"])).double()
m.load_state_dict({k: v.double() for k, v in ck["state"].items()})
tmp = os.path.join(tempfile.mkdtemp(), "f32.gguf")
export(ck, a.tokenizer, tmp, "f32")  # temporary file, removed below
g = torch.Generator().manual_seed(0)
ids = torch.randint(5, ck["config"]["vocab"], (2, 300), generator=g)
with torch.no_grad():
    ref_train = m(ids)
for path in (tmp, a.f16):
    r = RefModel(path, device="cpu", dtype=torch.float64)
    out = r.forward(ids)
    rel = ((out - ref_train).norm() / ref_train.norm()).item()
    agree = (out.argmax(-1) == ref_train.argmax(-1)).float().mean().item()
    print(f"{os.path.basename(path)}: rel err vs training module {rel:.2e}, argmax agreement {agree*100:.2f}%")
    if path == tmp:
        assert rel < 1e-6, "F32 export does not reproduce the training forward"
        os.remove(tmp)

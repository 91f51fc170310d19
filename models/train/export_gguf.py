"""Export a trained checkpoint to GGUF (architecture 'llama'), F16 and Q8_0.

Usage: python3 models/train/export_gguf.py --ckpt models/train/ckpt/model.pt \
          --tokenizer models/train/data/tokenizer.json --outdir models
Writes models/sa-default-f16.gguf and models/sa-default-q8_0.gguf.
"""
import argparse, json, os
import numpy as np
import torch
from gguf_io import (write_gguf, T_STR, T_U32, T_F32, T_BOOL, T_ARR, T_I32,
                     GGML_F32, GGML_F16, GGML_Q8_0)
from tokenizer import SPECIALS, BOS, EOS, PAD

CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
                 " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
                 "{{ '<|im_start|>assistant\\n' }}{% endif %}")
NAMES = {"attn_norm.weight": "attn_norm.weight", "wq.weight": "attn_q.weight", "wk.weight": "attn_k.weight",
         "wv.weight": "attn_v.weight", "wo.weight": "attn_output.weight", "ffn_norm.weight": "ffn_norm.weight",
         "w_gate.weight": "ffn_gate.weight", "w_up.weight": "ffn_up.weight", "w_down.weight": "ffn_down.weight"}


def export(ckpt, tok_path, path, ftype):
    c = ckpt["config"]
    sd = ckpt["state"]
    with open(tok_path, encoding="utf-8") as fh:
        tk = json.load(fh)
    tokens, merges = tk["tokens"], tk["merges"]
    assert len(tokens) == c["vocab"]
    ttype = [3 if i < len(SPECIALS) else 1 for i in range(len(tokens))]
    kvs = [
        ("general.architecture", T_STR, "llama"),
        ("general.name", T_STR, "sa-default"),
        ("general.description", T_STR, "Small Llama-architecture model trained from scratch for the sa SDK "
                                       "(passkey retrieval, associative recall, chat memory); see models/README.md"),
        ("general.alignment", T_U32, 32),
        ("general.file_type", T_U32, {"f32": 0, "f16": 1, "q8_0": 7}[ftype]),
    ]
    if ftype == "q8_0":
        kvs.append(("general.quantization_version", T_U32, 2))
    kvs += [
        ("llama.context_length", T_U32, c["ctx"]),
        ("llama.embedding_length", T_U32, c["d"]),
        ("llama.block_count", T_U32, c["n_layers"]),
        ("llama.feed_forward_length", T_U32, c["ffn"]),
        ("llama.attention.head_count", T_U32, c["n_heads"]),
        ("llama.attention.head_count_kv", T_U32, c["n_kv"]),
        ("llama.attention.layer_norm_rms_epsilon", T_F32, c["eps"]),
        ("llama.rope.freq_base", T_F32, c["rope_base"]),
        ("llama.rope.dimension_count", T_U32, c["head_dim"]),
        ("llama.vocab_size", T_U32, c["vocab"]),
        ("tokenizer.ggml.model", T_STR, "gpt2"),
        ("tokenizer.ggml.pre", T_STR, "qwen2"),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, tokens)),
        ("tokenizer.ggml.token_type", T_ARR, (T_I32, ttype)),
        ("tokenizer.ggml.merges", T_ARR, (T_STR, merges)),
        ("tokenizer.ggml.bos_token_id", T_U32, BOS),
        ("tokenizer.ggml.eos_token_id", T_U32, EOS),
        ("tokenizer.ggml.padding_token_id", T_U32, PAD),
        ("tokenizer.ggml.add_bos_token", T_BOOL, True),
        ("tokenizer.ggml.add_eos_token", T_BOOL, False),
        ("tokenizer.chat_template", T_STR, CHAT_TEMPLATE),
    ]
    mt = {"f32": GGML_F32, "f16": GGML_F16, "q8_0": GGML_Q8_0}[ftype]
    tens = [("token_embd.weight", sd["tok_emb.weight"].numpy(), mt),
            ("output_norm.weight", sd["norm.weight"].numpy(), GGML_F32)]
    for i in range(c["n_layers"]):
        for k, g in NAMES.items():
            a = sd[f"blocks.{i}.{k}"].numpy()
            tens.append((f"blk.{i}.{g}", a, GGML_F32 if a.ndim == 1 else mt))
    write_gguf(path, kvs, tens)
    print(f"wrote {path} ({os.path.getsize(path)/1e6:.2f} MB)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="models/train/ckpt/model.pt")
    ap.add_argument("--tokenizer", default="models/train/data/tokenizer.json")
    ap.add_argument("--outdir", default="models")
    a = ap.parse_args()
    ck = torch.load(a.ckpt, map_location="cpu")
    export(ck, a.tokenizer, os.path.join(a.outdir, "sa-default-f16.gguf"), "f16")
    export(ck, a.tokenizer, os.path.join(a.outdir, "sa-default-q8_0.gguf"), "q8_0")


if __name__ == "__main__":
    main()

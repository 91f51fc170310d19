#!/bin/sh
# Whole pipeline on one CUDA GPU, from the repository root, after build_corpus.sh and
# train_tokenizer.py have filled models/train/data:
#   sh models/train/run_on_gpu.sh [STEPS] [SECONDS]
# Trains (the cosine schedule ends at STEPS or after SECONDS of training, whichever comes
# first; the shipped model stopped on time, at step 2794 of 3600 on one H100), exports both
# GGUFs into models/, evaluates them (models/train/out/metrics.json) and writes the goldens
# into tests/golden/.
set -eu
STEPS=${1:-3600}
SECONDS_BUDGET=${2:-420}
export PYTHONUNBUFFERED=1
cd models/train
python3 train.py --data data --out ckpt --steps "$STEPS" --time-budget "$SECONDS_BUDGET"
python3 export_gguf.py --ckpt ckpt/model.pt --tokenizer data/tokenizer.json --outdir ..
python3 check_export.py --ckpt ckpt/model.pt --tokenizer data/tokenizer.json --f16 ../sa-default-f16.gguf
python3 evaluate.py --data data --gguf ../sa-default-f16.gguf ../sa-default-q8_0.gguf --out out/metrics.json ${EVAL_ARGS:-}
python3 make_goldens.py --f16 ../sa-default-f16.gguf --q8 ../sa-default-q8_0.gguf --outdir ../../tests/golden

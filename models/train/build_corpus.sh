#!/bin/sh
# Build the English training corpus for the sa default model from Debian packages.
# Usage (from the repository root, as root for apt-get):  sh models/train/build_corpus.sh
# Output: models/train/data/corpus/*.txt (ignored by git), deterministic for the
# package versions listed in models/README.md.
set -eu
PKGS="wamerican wordnet-base fortunes bible-kjv bible-kjv-text dict-gcide dict-foldoc gnu-standards coreutils diffutils findutils grep sed gzip bc ed time wget gettext"
if [ "$(id -u)" = "0" ]; then
  apt-get install -y --no-install-recommends $PKGS >/dev/null
else
  echo "not root: assuming these packages are installed: $PKGS" >&2
fi
for p in $PKGS; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done > models/train/data.versions.tmp 2>/dev/null || true
mkdir -p models/train/data/corpus
mv models/train/data.versions.tmp models/train/data/package_versions.txt
# King James Bible, whole text, one verse per line ("Ge1:1 In the beginning ...")
bible -f gen1:1-rev22:21 > models/train/data/kjv_raw.txt
python3 models/train/prepare_corpus.py models/train/data

#!/usr/bin/env bash
# Regenerates the cascade cache trace fixtures (tests/cascade/*.trace) read by
# tests/unit/cascade_index_test.cpp. Needs only python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 tools/cascade_sim.py --fixtures tests/cascade

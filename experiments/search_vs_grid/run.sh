#!/bin/sh
# Algorithm 2 (paper and Chinese-summary variants) vs the grid over the same space on this host.
# The grid profiles every point into a fresh cache; each search then runs against that cache, so it sees the
# very measurements the grid took and its cost is the profiling time of the points it visited (cached points
# keep what they cost). LIVE=1 also runs the paper's search with its own fresh profiles.
#   sh experiments/search_vs_grid/run.sh      (CPU, torch Cartpole, GMIs 4..1 x num_envs 128..16384: ~15 min)
# then re-measure the picks head to head (the grid's best is a maximum of single noisy profiles):
#   flock /tmp/gmiexp-bench.lock .venv/bin/python experiments/search_vs_grid/confirm.py \
#       experiments/search_vs_grid/results/grid/search.json experiments/search_vs_grid/results/*/search.json
set -e
cd "$(dirname "$0")/../.."
OUT=experiments/search_vs_grid/results
export GMIEXP_CACHE_DIR=$OUT/cache GMIEXP_PRESET_DIR=$OUT/presets
rm -rf "$GMIEXP_CACHE_DIR"
# The default search space and profile length (what `mode=search task=Cartpole` does); SPACE adds overrides.
SPACE="task=Cartpole search.timeout_s=400 ${SPACE:-}"
L="flock /tmp/gmiexp-bench.lock .venv/bin/python -m gmiexp mode=search $SPACE"
$L search.grid=true search.output=grid.yaml hydra.run.dir=$OUT/grid
$L search.output=paper.yaml hydra.run.dir=$OUT/paper
$L search.variant=cn search.output=cn.yaml hydra.run.dir=$OUT/cn
if [ -n "$LIVE" ]; then $L search.cache=false search.output=live.yaml hydra.run.dir=$OUT/live; fi
.venv/bin/python experiments/search_vs_grid/compare.py $OUT/grid/search.json $OUT/*/search.json

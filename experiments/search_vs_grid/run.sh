#!/bin/sh
# mode=search against the grid over the same space on this host (issue 17's "Done means" for part 5):
#   1. the grid profiles every point into a fresh cache (~10 min on the 2-core CPU box);
#   2. the paper's and the Chinese summary's rules run on the grid's cached profiles (they see the very
#      measurements the grid took; their cost is what those points cost the grid);
#   3. RUNS (default 5) live searches, each `python -m gmiexp mode=search task=Cartpole search.cache=false`
#      with fresh profiles (the default variant, paired; VARIANT=paper for the paper's rule), ~5 min each;
#   4. confirm.py re-measures every pick head to head against the grid's pick (the grid's best is the
#      maximum of 32 single noisy profiles, so its own numbers flatter it);
#   5. compare.py reports quality (grid values and re-measured), cost in wall time and in grid units, and
#      how many live runs met both bars.
#     sh experiments/search_vs_grid/run.sh               (everything: about 45 min)
#     SKIP_GRID=1 RUNS=3 VARIANT=paper sh ...            (more live runs against the grid already there)
# Every measuring command holds /tmp/gmiexp-bench.lock: nothing else may run meanwhile (the host's load is
# what the comparison measures).
set -e
cd "$(dirname "$0")/../.."
OUT=experiments/search_vs_grid/results
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-5}
export GMIEXP_CACHE_DIR=$OUT/cache GMIEXP_PRESET_DIR=$OUT/presets
L="flock /tmp/gmiexp-bench.lock $PY -m gmiexp mode=search task=Cartpole"
if [ -z "$SKIP_GRID" ]; then
  rm -rf "$GMIEXP_CACHE_DIR" "$OUT"/*_live*
  # The grid must not lose a big point to a slow spell: a longer timeout (it changes no measurement).
  $L search.grid=true search.timeout_s=400 search.output=grid.yaml hydra.run.dir=$OUT/grid
  $L search.variant=paper search.output=paper.yaml hydra.run.dir=$OUT/paper
  $L search.variant=cn search.output=cn.yaml hydra.run.dir=$OUT/cn
fi
NAME=${VARIANT:-paired}
i=1
while [ "$i" -le "$RUNS" ]; do
  n=1
  while [ -e "$OUT/${NAME}_live$n" ]; do n=$((n + 1)); done
  $L search.cache=false ${VARIANT:+search.variant=$VARIANT} search.output=${NAME}_live$n.yaml \
    hydra.run.dir=$OUT/${NAME}_live$n
  i=$((i + 1))
done
flock /tmp/gmiexp-bench.lock $PY experiments/search_vs_grid/confirm.py $OUT/grid/search.json $OUT/*_live*/search.json
$PY experiments/search_vs_grid/compare.py $OUT/grid/search.json $OUT/*/search.json

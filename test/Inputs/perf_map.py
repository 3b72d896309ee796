"""test/tools/fff-run/perf-map.mlir's helper: prints (`print`) or deletes (`remove`) the map
that fff-run's log says it wrote."""
import os
import re
import sys

log, action = sys.argv[1], sys.argv[2]
path = re.search(r"/tmp/perf-\d+\.map", open(log).read()).group(0)
if action == "print":
    sys.stdout.write(open(path).read())
else:
    os.remove(path)

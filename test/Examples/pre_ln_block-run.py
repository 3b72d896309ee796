# The README's main job also runs the example on the CPU against numpy.
# REQUIRES: numpy
# RUN: %python %fff_src_root/examples/run_pre_ln_block.py --rows 5 | FileCheck %s
# CHECK: pre_ln_block on the CPU: 5 rows x 768
# CHECK: relative error ||y - ref|| / ||ref|| = {{.*}} (tolerance 1e-5)

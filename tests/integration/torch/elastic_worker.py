#!/usr/bin/python3
"""The worker of test_recovery.py: deploy/demo/train_elastic.py (the
example of in-process restart), or, by TEST_MODE, a variant of it:

  stuck   a step that fails (a peer died) hangs for ever instead of
          raising, and check() never leaves: the worker never takes its
          next assignment
  plain   no rdzv.elastic: init_process_group, train once, exit 1 on any
          failure, as an ordinary script does

TEST_START_DELAY (seconds) holds the worker that long before it reaches
rdzv.elastic, as a slow import of torch on a busy host does.
"""

import importlib.util
import os
import sys
import time

import torch.distributed as dist

spec = importlib.util.spec_from_file_location("train_elastic", os.path.join(
    os.environ["RDZV_SOURCE_ROOT"], "deploy", "demo", "train_elastic.py"))
demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo)

MODE = os.environ.get("TEST_MODE", "")
time.sleep(float(os.environ.get("TEST_START_DELAY", "0")))

if MODE == "stuck":
    step = demo.one_step
    demo.rdzv.elastic.check = lambda: None

    def stuck_step(state, x, y):
        try:
            step(state, x, y)
        except RuntimeError:
            while True:
                time.sleep(60)
    demo.one_step = stuck_step

if MODE == "plain":
    dist.init_process_group("gloo")
    try:
        demo.train({})
    except Exception as e:  # noqa: BLE001
        print("plain worker: %s" % e, file=sys.stderr, flush=True)
        os._exit(1)
    sys.exit(0)
sys.exit(demo.main())

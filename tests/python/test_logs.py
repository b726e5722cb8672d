"""A logging handler may call back into the session whose worker logged the
line: state_dict(), run() and close() return instead of waiting for ever
(the handler runs on a thread of ddphooks.logs, not on the library's
worker). Each case runs in a child process with a timeout, so a deadlock
fails the test instead of hanging it."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numpy", reason="NumPy (Debian python3-numpy) is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")

CHILD = textwrap.dedent("""
    import logging, sys, threading
    import numpy as np
    sys.path.insert(0, {python_dir!r})
    import ddphooks

    call = sys.argv[1]
    config = {{"hook": {{"family": "powersgd", "name": "batched_powersgd",
                         "options": {{"start_iter": 0, "rank": 1, "error_feedback": False,
                                      "warm_start": False}}}}}}
    logger = logging.getLogger("ddphooks")
    logger.setLevel(logging.DEBUG)
    session = ddphooks.Session(config, rank=0, world_size=1)
    done = []

    class CallsBack(logging.Handler):
        def emit(self, record):
            if "step 1 of batched_powersgd" not in record.getMessage() or done:
                return
            # Logged by the session's worker while it ran a bucket.
            if call == "state_dict":
                done.append(len(session.state_dict()) > 0)
            elif call == "run":
                a = np.full(1024, 2.0, np.float32)
                session.run(a)
                done.append(bool(np.allclose(a, 2.0, rtol=1e-5)))  # rank 1 is exact here
            elif call == "close":
                session.close()
                done.append(True)

    logger.addHandler(CallsBack())
    session.run(np.ones(1024, np.float32))
    session.close()
    print("handler:", done)
    sys.exit(0 if done == [True] else 1)
""").format(python_dir=PYTHON_DIR)


@pytest.mark.parametrize("call", ["state_dict", "run", "close"])
def test_a_handler_that_calls_back_into_the_session_returns(call):
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, call], capture_output=True, timeout=60,
                           env=dict(os.environ, DDPH_LOG_LEVEL="debug"))
    except subprocess.TimeoutExpired:
        pytest.fail("a logging handler calling %s() from the worker's log line deadlocked" % call)
    out = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0, out
    assert "handler: [True]" in out, out

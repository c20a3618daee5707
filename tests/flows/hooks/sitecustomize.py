"""A scene that never finishes, for tests: put this folder first on PYTHONPATH and set

    N3D_TEST_HANG_SCENE  the scene id that hangs (`*`: every scene)
    N3D_TEST_HANG_MODE   `loop` (an endless loop of Python, at the lowest priority so that it
                         does not slow other tests), `pipe:PATH` (a blocking read of a named
                         pipe nobody writes), `sleep` (time.sleep), `die` (SIGKILL of the
                         process running the scene)
    N3D_TEST_HANG_MARKER a file touched when the hang starts (optional)

Python imports `sitecustomize` at start-up in every process (the CLI, a process pool's workers,
the fork server of scene processes), so the hang is where the scene really runs. Without the
variables this module does nothing.
"""

import os

if os.environ.get("N3D_TEST_HANG_SCENE"):
    import time
    from pathlib import Path

    from numerical3d.sources.scannet import ScanNetSource

    _load = ScanNetSource.load

    def _hanging_load(self, ref):
        if os.environ["N3D_TEST_HANG_SCENE"] in ("*", ref.scene_id):
            if marker := os.environ.get("N3D_TEST_HANG_MARKER"):
                Path(marker).touch()
            mode = os.environ.get("N3D_TEST_HANG_MODE", "sleep")
            if mode == "die":
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "loop":
                os.nice(19)  # the lowest priority: it still never ends, but leaves the CPU to other work
                while True:
                    pass
            if mode.startswith("pipe:"):
                with open(mode[5:], "rb") as pipe:  # blocks until a writer opens it: never
                    pipe.read()
            time.sleep(3600)
        return _load(self, ref)

    ScanNetSource.load = _hanging_load

"""A local S3-protocol server for the test suite (moto's standalone server).

Binds 127.0.0.1 on a free port, prints `http://127.0.0.1:PORT` on stdout,
and serves until its stdin closes (so it ends with the process that
started it), or until killed.
"""

import logging
import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    # One log line per request would dominate the output and the run time.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(f"http://{host}:{port}", flush=True)
    if "--forever" in sys.argv:
        import threading

        threading.Event().wait()
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()

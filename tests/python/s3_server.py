"""A local S3-protocol server for the test suite (moto's standalone server).

Binds 127.0.0.1 on a free port, prints `http://127.0.0.1:PORT` on stdout,
and serves until its stdin closes (so it ends with the process that
started it), or until killed.
"""

import collections
import logging
import sys
import threading

from moto.server import ThreadedMotoServer

# Requests served per bucket (path-style: the first path segment), so a
# test can compare a command's own count of its S3 requests with the
# server's: `GET /_pchronicle_requests/BUCKET` answers the number. No bucket
# can be named so (an underscore is not allowed in bucket names).
COUNTS: "collections.Counter[str]" = collections.Counter()
LOCK = threading.Lock()


def counting(app):
    def wrapped(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_pchronicle_requests/"):
            with LOCK:
                body = str(COUNTS[path.split("/")[2]]).encode()
            start_response(
                "200 OK",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        with LOCK:
            COUNTS[path.lstrip("/").split("/", 1)[0]] += 1
        return app(environ, start_response)

    return wrapped


def main() -> None:
    # One log line per request would dominate the output and the run time.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    server._server.app = counting(server._server.app)
    host, port = server.get_host_and_port()
    print(f"http://{host}:{port}", flush=True)
    if "--forever" in sys.argv:
        import threading

        threading.Event().wait()
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()

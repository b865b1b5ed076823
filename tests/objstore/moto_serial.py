"""moto's S3 server with one request at a time.

    python tests/objstore/moto_serial.py HOST PORT

This is `moto_server` (the same WSGI application, host dispatch and request
handler) with one change: a lock around each request. moto implements
`If-None-Match: *` on PutObject as "look up the key, then store it", and its
server answers requests on parallel threads, so two racing conditional puts
of the same key could both succeed there. Real S3 (and GCS, Azure) decide a
conditional put atomically, and the Delta commit relies on exactly that: the
lock gives the test server the same guarantee. Connections are still served
on threads, so a slow client never blocks the others between requests.
"""

import signal
import sys
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


class OneAtATime:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # The body is materialised inside the lock: moto builds it while
            # it handles the request, and a lazy iterator would escape it.
            return list(self.app(environ, start_response))


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        host,
        port,
        OneAtATime(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()

"""A test upstream for the egress gate: HTTP and HTTPS servers that answer every request with
JSON describing it (method, path, headers, body length), run inside a test network namespace.

Paths: /bytes/N answers N bytes of 'x'; /redirect?to=URL answers 302 to URL; /_seen the
(method, path) of every request so far; anything else the JSON echo. Usage: echo_server.py HOST HTTP_PORT [HTTPS_PORT CERT KEY]..."""
import http.server
import json
import socketserver
import ssl
import sys
import threading
import urllib.parse


SEEN = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/_seen":
            out = json.dumps(SEEN).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        elif url.path.startswith("/bytes/"):
            out = b"x" * int(url.path.rsplit("/", 1)[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
        elif url.path == "/redirect":
            target = urllib.parse.parse_qs(url.query)["to"][0]
            out = b""
            self.send_response(302)
            self.send_header("Location", target)
        else:
            SEEN.append((self.command, self.path))
            out = json.dumps({"method": self.command, "path": self.path,
                              "headers": {k.lower(): v for k, v in self.headers.items()},
                              "body_bytes": len(body),
                              "tls": isinstance(self.connection, ssl.SSLSocket)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = answer


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(host, port, cert=None, key=None):
    server = Server((host, port), Handler)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    host, args = sys.argv[1], sys.argv[2:]
    serve(host, int(args[0]))
    rest = args[1:]
    while rest:
        port, cert, key, rest = int(rest[0]), rest[1], rest[2], rest[3:]
        serve(host, port, cert, key)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()

"""A folder of wheels served read-only over HTTP on Docker's default bridge while a build runs.

A build's RUN steps reach the host at the bridge's gateway address and install from there
with ``--no-index``: no registry, no proxy, no certificates, and the wheels never become a
layer of the image.
"""
import functools
import http.server
import ipaddress
import threading

from harness.errors import UserError


def bridge_gateway(client):
    """The host's address on Docker's default bridge (what a build's RUN steps can reach)."""
    try:
        config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
        # older engines leave Gateway out: the bridge then takes the subnet's first address
        return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
    except Exception as exc:
        raise UserError("cannot find the address of Docker's default bridge to serve wheels to the build "
                        "(%s)" % exc) from None


class WheelServer:
    """Serve one folder read-only over HTTP on `host` (a free port) while a build runs."""

    def __init__(self, folder, host):
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer((host, 0), handler)
        self.url = "http://%s:%d/" % (host, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

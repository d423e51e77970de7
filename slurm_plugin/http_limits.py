"""Limits every HTTP server of the product sets on its connections (the metrics exporter, the web page).

A client that opens a connection and sends nothing (or a request line a byte a minute) would hold one of the server's
threads for ever; each connection's socket gets a timeout instead, after which the server closes it. Scrapes and page
requests complete in well under it.
"""

from __future__ import annotations

CONNECTION_TIMEOUT = 15.0  # seconds a connection may stay silent (socketserver.StreamRequestHandler.timeout)

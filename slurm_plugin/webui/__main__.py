"""`python -m slurm_plugin.webui --listen HOST:PORT --slurmrestd URL --manifest PATH [--templates DIR]
[--certificate PEM --key PEM]`: the web page's server (slurm-webui.service), HTTPS with the certificate and key.
Logs one line per request (never a token) to stderr and `--log-file`."""

from __future__ import annotations

import argparse
import ssl
import sys

from slurm_plugin import logs
from slurm_plugin.manifest import ManifestError, load_manifest
from slurm_plugin.webui import templates
from slurm_plugin.webui.server import WebUi, make_server, tls_context
from slurm_plugin.webui.zones import NodeZones


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT -> (host, port); ValueError (one line) otherwise."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen: '{text}' is not HOST:PORT")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    """Serve until stopped."""
    parser = argparse.ArgumentParser(prog="slurm-webui", description=__doc__)
    parser.add_argument("--listen", required=True, metavar="HOST:PORT", help="where the page is served")
    parser.add_argument("--slurmrestd", required=True, metavar="URL", help="slurmrestd, e.g. http://127.0.0.1:6820")
    parser.add_argument("--manifest", required=True, metavar="PATH", help="the runtime manifest (event log, logs)")
    parser.add_argument("--templates", metavar="DIR", help="directory of *.sbatch job templates")
    parser.add_argument("--log-file", metavar="PATH", help="also log here (the unit logs to the journal)")
    parser.add_argument("--certificate", metavar="PEM", help="serve HTTPS with this certificate (and --key)")
    parser.add_argument("--key", metavar="PEM", help="the certificate's private key")
    args = parser.parse_args(argv)
    if (args.certificate is None) != (args.key is None):
        print("slurm-webui: --certificate and --key go together", file=sys.stderr)
        return 2
    if "" in (args.certificate, args.key):  # an unset ${ES_WEBUI_CERT} in the unit: never plain HTTP by accident
        print("slurm-webui: --certificate and --key may not be empty", file=sys.stderr)
        return 2
    try:
        host, port = parse_listen(args.listen)
        manifest = load_manifest(args.manifest)
    except (ValueError, ManifestError) as exc:
        print(f"slurm-webui: {exc}", file=sys.stderr)
        return 2
    log = logs.setup(args.log_file, "slurm-webui")
    webui = WebUi(args.slurmrestd, templates.load(args.templates), NodeZones(manifest.state_dir).current)
    try:
        tls = tls_context(args.certificate, args.key) if args.certificate is not None else None
    except (OSError, ssl.SSLError) as exc:
        log.error("cannot use the certificate %s and key %s: %s", args.certificate, args.key, exc)
        return 1
    try:
        server = make_server(host, port, webui, tls)
    except OSError as exc:
        log.error("cannot listen on %s: %s", args.listen, exc.strerror)
        return 1
    log.info("serving %s on %s, slurmrestd %s", "https" if tls else "http", args.listen, args.slurmrestd)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The runtime: hosts user code in worker processes and serves calls on a Unix socket.

`python -m asya.runtime` with `ASYA_HANDLER=module:attr`. See `frames` for the protocol,
`workers` for the process pool that enforces timeouts, `client` for the sidecar's side.
"""

"""The REST API's small web page (clusters[].rest_api, docs/rest-api.md): partitions, nodes per state and per
availability zone, the user's jobs, and a form that submits a job template.

Runs on the controller as slurm-webui.service (assets/systemd), as the unprivileged `slurmrestd` account. The page is
static HTML + vanilla JS (`static/`); the server (`server.py`) serves it over HTTPS, with the controller's own
certificate (`certificate.py`, made by config apply), and forwards same-origin `/slurm/...` and
`/openapi/...` requests to slurmrestd on 127.0.0.1 (`proxy.py`), so the browser needs no CORS and slurmrestd is never
exposed. The user pastes their name and a token from `scontrol token`; the page keeps it in memory only and the server
never logs it. Node AZs come from the plugin's event log (`zones.py`): Slurm does not know them.
"""

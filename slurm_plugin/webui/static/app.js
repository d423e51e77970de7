// The page's logic: every call goes to this same origin (/slurm/... is forwarded to slurmrestd, /elastic/... is the
// page's server). The token stays in this page's memory only; text is always set with textContent (no HTML).
"use strict";
const API = "/slurm/v0.0.45"; // cluster_config/model_rest_api.py DATA_PARSER
const REFRESH_MS = 3000;
const auth = { user: "", token: "" };
let timer = null;

const $ = (id) => document.getElementById(id);

function say(element, text, kind) {
  element.textContent = text;
  element.className = kind || "";
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { "X-SLURM-USER-NAME": auth.user, "X-SLURM-USER-TOKEN": auth.token, Accept: "application/json" };
  if (options.body) headers["Content-Type"] = "application/json";
  const answer = await fetch(path, { ...options, headers });
  let data = {};
  try { data = await answer.json(); } catch (e) { data = {}; }
  if (answer.status === 401 || answer.status === 403) {
    throw new ApiError(answer.status, `Token refused (HTTP ${answer.status}): get a new one with scontrol token`);
  }
  const errors = (data.errors || []).filter((e) => e && (e.error || e.description));
  if (!answer.ok || errors.length) {
    const first = errors[0] || {};
    throw new ApiError(answer.status, `HTTP ${answer.status}: ${first.description || first.error || answer.statusText}`);
  }
  return data;
}

function fill(tableId, rows) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = String(cell);
      tr.append(td);
    }
    return tr;
  }));
}

function counts(items) {
  const out = new Map();
  for (const item of items) out.set(item, (out.get(item) || 0) + 1);
  return [...out.entries()].sort((a, b) => String(a[0]).localeCompare(String(b[0])));
}

const states = (value) => (Array.isArray(value) ? value.join("+") : String(value || ""));

async function refresh() {
  try {
    const [partitions, nodes, jobs, zones] = await Promise.all([
      api(`${API}/partitions/`), api(`${API}/nodes/`), api(`${API}/jobs/`), api("/elastic/node-zones"),
    ]);
    const parts = partitions.partitions || [];
    fill("partitions", parts.map((p) => [
      p.name, states((p.partition || {}).state), (p.nodes || {}).total ?? "", (p.cpus || {}).total ?? "",
    ]));
    const select = $("partition");
    if (select.options.length !== parts.length) {
      select.replaceChildren(...parts.map((p) => new Option(p.name, p.name)));
    }
    const nodeList = nodes.nodes || [];
    fill("node-states", counts(nodeList.map((n) => states(n.state))));
    const zoneOf = zones.zones || {};
    fill("node-zones", counts(nodeList.map((n) => zoneOf[n.name] || "(no instance)")));
    const mine = (jobs.jobs || []).filter((j) => j.user_name === auth.user).sort((a, b) => b.job_id - a.job_id);
    fill("jobs", mine.map((j) => [j.job_id, j.name, states(j.job_state), j.partition, j.nodes || ""]));
    say($("status"), `Connected as ${auth.user}; updated ${new Date().toLocaleTimeString()}`, "ok");
  } catch (error) {
    say($("status"), error.message, "error");
    if (error.status === 401 || error.status === 403) stop();
  }
}

function stop() {
  if (timer !== null) clearInterval(timer);
  timer = null;
}

async function loadTemplates() {
  const answer = await fetch("/elastic/templates");
  const { templates: list, workdir } = await answer.json();
  if (!$("job-dir").value) $("job-dir").value = workdir;
  const select = $("template");
  select.replaceChildren(...list.map((t) => new Option(t.name, t.name)));
  const show = () => {
    const chosen = list.find((t) => t.name === select.value) || list[0];
    $("script").value = chosen.script;
    $("template-summary").textContent = chosen.summary;
    const option = (flag, fallback) => {
      const found = chosen.script.match(new RegExp(`^#SBATCH\\s+${flag}\\s*(\\S+)`, "m"));
      return found ? found[1] : fallback;
    };
    $("job-name").value = option("-J", chosen.name);
    $("job-nodes").value = option("-N", "1").replace(/-.*/, "");
    $("job-tasks").value = option("-n", "1");
    const minutes = option("-t", "10");
    $("job-time").value = /^\d+$/.test(minutes) ? minutes : "10";
  };
  select.addEventListener("change", show);
  show();
}

async function submit(event) {
  event.preventDefault();
  const job = {
    script: $("script").value,
    partition: $("partition").value,
    name: $("job-name").value || "web",
    minimum_nodes: Number($("job-nodes").value) || 1,
    tasks: Number($("job-tasks").value) || 1,
    time_limit: Number($("job-time").value) || 10,
    current_working_directory: $("job-dir").value.trim() || "/tmp",
    environment: ["PATH=/usr/local/bin:/usr/bin:/bin"],
  };
  if ($("job-nodelist").value.trim()) job.required_nodes = $("job-nodelist").value.trim();
  try {
    const answer = await api(`${API}/job/submit`, { method: "POST", body: JSON.stringify({ job }) });
    say($("submit-result"), `Submitted job ${answer.job_id}`, "ok");
    refresh();
  } catch (error) {
    say($("submit-result"), error.message, "error");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    auth.user = $("user").value.trim();
    auth.token = $("token").value.trim();
    stop();
    refresh();
    timer = setInterval(refresh, REFRESH_MS);
  });
  $("submit-form").addEventListener("submit", submit);
  loadTemplates().catch((error) => say($("submit-result"), `No templates: ${error.message}`, "error"));
});

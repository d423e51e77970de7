// Evaluate IAM authorization requests against identity policies (and, optionally, a resource policy) with
// @cloud-copilot/iam-simulate.
// stdin: {"account": "...", "policies": {"name": {...}}, "requests": [{"action", "resource", "context"}],
//         "resourcePolicy": {...} (optional: the resource's own policy, e.g. an EFS file system policy),
//         "principal": "arn:..." | "anonymous" (optional: who asks; default a role of `account`)}
// stdout: [{"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "Error", "detail": "..."}]
import { anonymousPrincipal, runSimulation } from '@cloud-copilot/iam-simulate';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString());
const identityPolicies = Object.entries(input.policies).map(([name, policy]) => ({ name, policy }));
const principal =
  input.principal === 'anonymous'
    ? anonymousPrincipal
    : input.principal ?? `arn:aws:iam::${input.account}:role/under-test`;
const out = [];
for (const request of input.requests) {
  const simulation = {
    request: {
      principal,
      action: request.action,
      resource: { resource: request.resource, accountId: input.account },
      contextVariables: request.context,
    },
    identityPolicies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  };
  if (input.resourcePolicy) simulation.resourcePolicy = input.resourcePolicy;
  const result = await runSimulation(simulation, {});
  if (result.resultType === 'error') {
    out.push({ result: 'Error', detail: JSON.stringify(result.errors) });
  } else {
    out.push({ result: result.overallResult, detail: '' });
  }
}
process.stdout.write(JSON.stringify(out));

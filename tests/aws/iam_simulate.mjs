// Evaluate IAM authorization requests against identity policies with @cloud-copilot/iam-simulate.
// stdin: {"account": "...", "policies": {"name": {...}}, "requests": [{"action", "resource", "context"}]}
// stdout: [{"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "Error", "detail": "..."}]
import { runSimulation } from '@cloud-copilot/iam-simulate';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString());
const identityPolicies = Object.entries(input.policies).map(([name, policy]) => ({ name, policy }));
const out = [];
for (const request of input.requests) {
  const simulation = {
    request: {
      principal: `arn:aws:iam::${input.account}:role/under-test`,
      action: request.action,
      resource: { resource: request.resource, accountId: input.account },
      contextVariables: request.context,
    },
    identityPolicies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  };
  const result = await runSimulation(simulation, {});
  if (result.resultType === 'error') {
    out.push({ result: 'Error', detail: JSON.stringify(result.errors) });
  } else {
    out.push({ result: result.overallResult, detail: '' });
  }
}
process.stdout.write(JSON.stringify(out));

// Drives fhir-kit-client, unchanged, against an Understudy FHIR base and prints what it
// saw as one JSON object (tests/fhir/test_node_clients.py asserts it).
//
//   node run.mjs <fhir base URL> <bearer key>      (or FHIR_BASE and FHIR_KEY)
import { Client } from 'fhir-kit-client';

const baseUrl = process.argv[2] || process.env.FHIR_BASE;
const key = process.argv[3] || process.env.FHIR_KEY;
if (!baseUrl || !key) {
  console.error('usage: node run.mjs <fhir base URL> <bearer key>');
  process.exit(2);
}
const client = new Client({ baseUrl, bearerToken: key });
const tag = Math.random().toString(36).slice(2, 12);
const family = `Kit${tag}`;
const system = 'urn:test:fhir-kit';
const out = {};

async function status(promise) {
  try {
    await promise;
    return 'ok';
  } catch (err) {
    return err.response ? err.response.status : String(err);
  }
}

const patient = (i, extra = {}) => ({
  resourceType: 'Patient',
  name: [{ family, given: [`Given${i}`] }],
  gender: i % 2 ? 'female' : 'male',
  birthDate: `19${50 + (i % 40)}-01-0${1 + (i % 9)}`,
  ...extra,
});

// create, read
const made = await client.create({ resourceType: 'Patient', body: patient(1) });
out.created = { id: made.id, version: made.meta.versionId };
const read = await client.read({ resourceType: 'Patient', id: made.id });
out.read = { id: read.id, family: read.name[0].family };

// update (PUT with the id), then JSON Patch
const updated = await client.update({
  resourceType: 'Patient',
  id: made.id,
  body: { ...read, active: true },
});
out.updated = { version: updated.meta.versionId, active: updated.active };
const patched = await client.patch({
  resourceType: 'Patient',
  id: made.id,
  jsonPatch: [{ op: 'replace', path: '/gender', value: 'other' }],
});
out.patched = { version: patched.meta.versionId, gender: patched.gender };

// transaction: 24 more Patients of the family, one referring to another by urn:uuid
const entries = [];
for (let i = 0; i < 24; i += 1) {
  entries.push({
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    resource: patient(i + 2, i === 1
      ? { link: [{ other: { reference: 'urn:uuid:00000000-0000-4000-8000-000000000000' }, type: 'seealso' }] }
      : {}),
    request: { method: 'POST', url: 'Patient' },
  });
}
const tx = await client.transaction({
  body: { resourceType: 'Bundle', type: 'transaction', entry: entries },
});
out.transaction = {
  type: tx.type,
  statuses: [...new Set(tx.entry.map((e) => e.response.status))],
  linkResolved: tx.entry[1].resource.link[0].other.reference === `Patient/${tx.entry[0].resource.id}`,
};

// search with paging: 25 of the family, 10 a page, walked with nextPage
let page = await client.search({ resourceType: 'Patient', searchParams: { family, _count: 10 } });
const seen = [];
let pages = 0;
while (page) {
  pages += 1;
  for (const e of page.entry || []) seen.push(e.resource.id);
  page = client.nextPage({ bundle: page });
  if (page) page = await page;
}
out.search = { total: seen.length, unique: new Set(seen).size, pages };

// conditional update (update with searchParams): creates, then updates the one match
const mrn = `MRN-${tag}`;
const criteria = { identifier: `${system}|${mrn}` };
const withId = patient(99, { identifier: [{ system, value: mrn }] });
const condCreated = await client.update({ resourceType: 'Patient', searchParams: criteria, body: withId });
const condUpdated = await client.update({
  resourceType: 'Patient',
  searchParams: criteria,
  body: { ...withId, active: false },
});
out.conditionalUpdate = {
  sameId: condCreated.id === condUpdated.id,
  versions: [condCreated.meta.versionId, condUpdated.meta.versionId],
};

// conditional patch (FHIRPath Patch) and conditional delete: raw requests, as the client
// has no method of its own for them
const query = new URLSearchParams(criteria).toString();
const fhirpathPatch = {
  resourceType: 'Parameters',
  parameter: [{
    name: 'operation',
    part: [
      { name: 'type', valueCode: 'replace' },
      { name: 'path', valueString: 'Patient.active' },
      { name: 'value', valueBoolean: true },
    ],
  }],
};
const condPatched = await client.request(`Patient?${query}`, {
  method: 'PATCH',
  body: fhirpathPatch,
  options: { headers: { 'content-type': 'application/fhir+json' } },
});
out.conditionalPatch = { id: condPatched.id, active: condPatched.active, version: condPatched.meta.versionId };
out.conditionalDelete = await status(client.request(`Patient?${query}`, { method: 'DELETE' }));
out.afterConditionalDelete = await status(client.read({ resourceType: 'Patient', id: condCreated.id }));

// delete, then the read is 410
out.deleted = await status(client.delete({ resourceType: 'Patient', id: made.id }));
out.afterDelete = await status(client.read({ resourceType: 'Patient', id: made.id }));
out.missing = await status(client.read({ resourceType: 'Patient', id: 'no-such-patient' }));

console.log(JSON.stringify(out));

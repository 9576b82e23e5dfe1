// Tests run under Node's own runner and are not part of the package (only dist/ is).
/* eslint-disable @n8n/community-nodes/no-restricted-imports */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
	ApiError,
	call,
	fhirBaseFor,
	fhirRequest,
	outcomeText,
	parseJson,
	problemText,
	search,
	type ApiRequest,
	type HttpAnswer,
} from '../nodes/shared/api';
import { runStartBody } from '../nodes/shared/runs';
import { createRequest, matches, subscriptionConfig } from '../nodes/shared/subscription';

const API = 'http://127.0.0.1:8000';
const RUN_BASE = `${API}/api/testing/runs/run_abc/fhir/r4`;

/** A fake server: answers in order, records what was asked. */
function fakeSend(answers: HttpAnswer[]) {
	const asked: ApiRequest[] = [];
	const send = async (request: ApiRequest) => {
		asked.push(request);
		const answer = answers.shift();
		if (!answer) throw new Error(`unexpected request ${request.method} ${request.url}`);
		return answer;
	};
	return { send, asked };
}

test('FHIR bases: a run, the tenant, a fhirBase on the credential server only', () => {
	assert.equal(fhirBaseFor('run', API, { runId: ' run_abc ' }), RUN_BASE);
	assert.equal(fhirBaseFor('tenant', API, {}), `${API}/api/fhir/r4`);
	assert.equal(fhirBaseFor('fhirBase', API, { fhirBase: RUN_BASE + '/' }), RUN_BASE);
	assert.throws(
		() => fhirBaseFor('fhirBase', API, { fhirBase: 'http://evil.example/api/fhir/r4' }),
		/not on the credential's server/,
	);
	assert.throws(
		() => fhirBaseFor('fhirBase', API, { fhirBase: 'http://127.0.0.1:8001/api/fhir/r4' }),
		/not on the credential's server/,
	);
	// A base URL with a path: the FHIR base must be under it.
	assert.equal(
		fhirBaseFor('fhirBase', 'https://h.example/us', {
			fhirBase: 'https://h.example/us/api/fhir/r4',
		}),
		'https://h.example/us/api/fhir/r4',
	);
	assert.throws(
		() =>
			fhirBaseFor('fhirBase', 'https://h.example/us', {
				fhirBase: 'https://h.example/usx/api/fhir/r4',
			}),
		/not on/,
	);
	assert.throws(() => fhirBaseFor('fhirBase', API, { fhirBase: '' }), /empty/);
	assert.throws(() => fhirBaseFor('run', API, { runId: '' }), /empty/);
});

test('requests: every operation sends Accept: application/json', () => {
	const resource = { resourceType: 'Task', status: 'requested' };
	const cases = [
		[
			fhirRequest(RUN_BASE, 'read', { resourceType: 'Patient', id: 'p1' }),
			'GET',
			`${RUN_BASE}/Patient/p1`,
		],
		[
			fhirRequest(RUN_BASE, 'read', { resourceType: 'ServiceRequest', id: 'ServiceRequest/o1' }),
			'GET',
			`${RUN_BASE}/ServiceRequest/o1`,
		],
		[
			fhirRequest(RUN_BASE, 'delete', { resourceType: 'Task', id: 't1' }),
			'DELETE',
			`${RUN_BASE}/Task/t1`,
		],
		[
			fhirRequest(RUN_BASE, 'search', {
				resourceType: 'Observation',
				query: [
					['_id', 'a,b'],
					['code', 'x|1'],
					['code', 'y|2'],
					[' ', 'dropped'],
				],
			}),
			'GET',
			`${RUN_BASE}/Observation?_id=a%2Cb&code=x%7C1&code=y%7C2`,
		],
		[
			fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }),
			'GET',
			`${RUN_BASE}/Observation`,
		],
		[
			fhirRequest(RUN_BASE, 'create', { resourceType: 'Task', resource }),
			'POST',
			`${RUN_BASE}/Task`,
		],
		[
			fhirRequest(RUN_BASE, 'update', {
				resourceType: 'Task',
				id: 't1',
				resource: JSON.stringify(resource),
			}),
			'PUT',
			`${RUN_BASE}/Task/t1`,
		],
		[
			fhirRequest(RUN_BASE, 'patch', {
				resourceType: 'Task',
				id: 't1',
				patch: { status: 'completed' },
			}),
			'PATCH',
			`${RUN_BASE}/Task/t1`,
		],
	] as const;
	for (const [request, method, url] of cases) {
		assert.equal(request.method, method);
		assert.equal(request.url, url);
		assert.equal(request.headers.Accept, 'application/json');
	}
});

test('requests: bodies, If-None-Exist and patch formats', () => {
	const create = fhirRequest(RUN_BASE, 'conditionalCreate', {
		resourceType: 'Task',
		resource: '{"status": "requested"}',
		ifNoneExist: '?identifier=urn:x|evt_1',
	});
	assert.equal(create.headers['If-None-Exist'], 'identifier=urn:x|evt_1');
	assert.equal(create.headers['Content-Type'], 'application/fhir+json');
	assert.deepEqual(JSON.parse(create.body as string), {
		status: 'requested',
		resourceType: 'Task',
	});
	assert.throws(
		() =>
			fhirRequest(RUN_BASE, 'conditionalCreate', {
				resourceType: 'Task',
				resource: {},
				ifNoneExist: ' ',
			}),
		/If-None-Exist is empty/,
	);

	const update = fhirRequest(RUN_BASE, 'update', {
		resourceType: 'Task',
		id: 't1',
		resource: { status: 'ready' },
	});
	assert.deepEqual(JSON.parse(update.body as string), {
		status: 'ready',
		resourceType: 'Task',
		id: 't1',
	});
	assert.throws(
		() =>
			fhirRequest(RUN_BASE, 'update', { resourceType: 'Task', id: 't1', resource: { id: 't2' } }),
		/'t2' is not 't1'/,
	);
	assert.throws(
		() =>
			fhirRequest(RUN_BASE, 'create', {
				resourceType: 'Task',
				resource: { resourceType: 'Patient' },
			}),
		/is a Patient, not a Task/,
	);
	assert.throws(
		() => fhirRequest(RUN_BASE, 'create', { resourceType: 'Task', resource: '{nope' }),
		/not JSON/,
	);
	assert.throws(
		() => fhirRequest(RUN_BASE, 'create', { resourceType: 'Task', resource: [1] }),
		/JSON object/,
	);

	const merge = fhirRequest(RUN_BASE, 'patch', {
		resourceType: 'Task',
		id: 't1',
		patch: '{"status": "completed"}',
		patchFormat: 'mergePatch',
	});
	assert.equal(merge.headers['Content-Type'], 'application/merge-patch+json');
	assert.equal(merge.body, '{"status":"completed"}');
	const ops = [{ op: 'replace', path: '/status', value: 'completed' }];
	const jsonPatch = fhirRequest(RUN_BASE, 'patch', {
		resourceType: 'Task',
		id: 't1',
		patch: ops,
		patchFormat: 'jsonPatch',
	});
	assert.equal(jsonPatch.headers['Content-Type'], 'application/json-patch+json');
	assert.deepEqual(JSON.parse(jsonPatch.body as string), ops);
	assert.throws(
		() =>
			fhirRequest(RUN_BASE, 'patch', {
				resourceType: 'Task',
				id: 't1',
				patch: {},
				patchFormat: 'jsonPatch',
			}),
		/array of operations/,
	);
	assert.throws(
		() =>
			fhirRequest(RUN_BASE, 'patch', {
				resourceType: 'Task',
				id: 't1',
				patch: [],
				patchFormat: 'mergePatch',
			}),
		/is an object/,
	);

	assert.throws(
		() => fhirRequest(RUN_BASE, 'read', { resourceType: 'task', id: 'x' }),
		/not a FHIR resource type/,
	);
	assert.throws(
		() => fhirRequest(RUN_BASE, 'read', { resourceType: 'Task', id: 'a b?c' }),
		/not a FHIR resource id/,
	);
	assert.throws(
		() => fhirRequest(RUN_BASE, 'read', { resourceType: 'Task', id: '../metadata' }),
		ApiError,
	);
	assert.throws(
		() => fhirRequest(RUN_BASE, 'read', { resourceType: 'Task', id: 'Patient/p1' }),
		/reference to a Patient, not a Task/,
	);
});

test('answers are parsed as JSON whatever their form', () => {
	const bundle = { resourceType: 'Bundle', type: 'searchset' };
	assert.deepEqual(parseJson(JSON.stringify(bundle)), bundle);
	assert.deepEqual(parseJson(Buffer.from(JSON.stringify(bundle))), bundle);
	assert.deepEqual(parseJson(new TextEncoder().encode(JSON.stringify(bundle)).buffer), bundle);
	assert.deepEqual(parseJson(bundle), bundle);
	assert.equal(parseJson(''), null);
	assert.equal(parseJson(undefined), null);
	assert.throws(
		() => parseJson('<html>oops</html>', 502),
		(error: ApiError) => {
			assert.match(error.message, /answer \(502\) is not JSON: <html>oops/);
			return true;
		},
	);
});

test('OperationOutcome and problem+json become text', () => {
	assert.equal(
		outcomeText({
			resourceType: 'OperationOutcome',
			issue: [
				{ severity: 'error', code: 'not-found', diagnostics: 'Patient/nope is not known' },
				{
					severity: 'error',
					code: 'invalid',
					details: { text: 'bad status' },
					expression: ['Task.status'],
				},
				{ severity: 'error', code: 'processing' },
			],
		}),
		'Patient/nope is not known; bad status (at Task.status); processing',
	);
	assert.equal(outcomeText({ resourceType: 'Patient' }), undefined);
	assert.equal(
		problemText({ title: "no scenario 'x'", status: 404, detail: "no scenario 'x'" }),
		"no scenario 'x'",
	);
	assert.equal(
		problemText({
			title: 'invalid',
			detail: 'invalid',
			errors: [{ path: 'events[0]', message: "unknown event 'x'" }],
		}),
		"invalid (events[0]: unknown event 'x')",
	);
});

test('call: 2xx parsed, 4xx/5xx an ApiError with the diagnostics', async () => {
	const ok = fakeSend([{ statusCode: 200, body: '{"resourceType":"Patient","id":"p1"}' }]);
	assert.deepEqual(
		(await call(ok.send, fhirRequest(RUN_BASE, 'read', { resourceType: 'Patient', id: 'p1' })))
			.body,
		{ resourceType: 'Patient', id: 'p1' },
	);

	const outcome = {
		resourceType: 'OperationOutcome',
		issue: [{ severity: 'error', code: 'not-found', diagnostics: 'Patient/nope is not known' }],
	};
	const notFound = fakeSend([{ statusCode: 404, body: JSON.stringify(outcome) }]);
	await assert.rejects(
		call(notFound.send, fhirRequest(RUN_BASE, 'read', { resourceType: 'Patient', id: 'nope' })),
		(error: ApiError) => {
			assert.ok(error instanceof ApiError);
			assert.equal(error.statusCode, 404);
			assert.equal(error.message, 'Understudy answered 404: Patient/nope is not known');
			assert.deepEqual(error.body, outcome);
			return true;
		},
	);
	const html = fakeSend([{ statusCode: 502, body: '<html>bad gateway</html>' }]);
	await assert.rejects(
		call(html.send, fhirRequest(RUN_BASE, 'read', { resourceType: 'Patient', id: 'p' })),
		/answered 502/,
	);
	const text = fakeSend([{ statusCode: 200, body: 'not json' }]);
	await assert.rejects(
		call(text.send, fhirRequest(RUN_BASE, 'read', { resourceType: 'Patient', id: 'p' })),
		/is not JSON/,
	);
});

function page(ids: string[], next?: string) {
	return {
		statusCode: 200,
		body: JSON.stringify({
			resourceType: 'Bundle',
			type: 'searchset',
			total: 5,
			link: [{ relation: 'self', url: 'x' }, ...(next ? [{ relation: 'next', url: next }] : [])],
			entry: ids.map((id) => ({
				fullUrl: `${RUN_BASE}/Observation/${id}`,
				resource: { resourceType: 'Observation', id },
			})),
		}),
	};
}

test('search: every page by the next links', async () => {
	const next1 = `${RUN_BASE}/Observation?_count=2&_after=b`;
	const next2 = `${RUN_BASE}/Observation?_count=2&_after=d`;
	const server = fakeSend([page(['a', 'b'], next1), page(['c', 'd'], next2), page(['e'])]);
	const request = fhirRequest(RUN_BASE, 'search', {
		resourceType: 'Observation',
		query: [['_count', '2']],
	});
	const found = await search(server.send, request, API, { returnAll: true });
	assert.deepEqual(
		found.resources.map((r) => r.id),
		['a', 'b', 'c', 'd', 'e'],
	);
	assert.equal(found.pages, 3);
	assert.deepEqual(
		server.asked.map((r) => r.url),
		[`${RUN_BASE}/Observation?_count=2`, next1, next2],
	);
	assert.ok(server.asked.every((r) => r.headers.Accept === 'application/json'));
	assert.equal(found.bundle.resourceType, 'Bundle');
	assert.equal(found.bundle.total, 5);
	assert.equal((found.bundle.entry as unknown[]).length, 5);
	assert.equal(found.bundle.link, undefined);
});

test('search: a limit stops asking for pages once reached', async () => {
	const server = fakeSend([
		page(['a', 'b'], `${RUN_BASE}/Observation?_after=b`),
		page(['c', 'd'], `${RUN_BASE}/Observation?_after=d`),
	]);
	const found = await search(
		server.send,
		fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }),
		API,
		{ returnAll: false, limit: 3 },
	);
	assert.deepEqual(
		found.resources.map((r) => r.id),
		['a', 'b', 'c'],
	);
	assert.equal(server.asked.length, 2);
	const one = fakeSend([page(['a', 'b'], `${RUN_BASE}/Observation?_after=b`)]);
	const first = await search(
		one.send,
		fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }),
		API,
		{ returnAll: false, limit: 2 },
	);
	assert.equal(first.pages, 1);
});

test('search: outcome entries are no resources; next links off the server, loops and non-Bundles refused', async () => {
	const mixed = fakeSend([
		{
			statusCode: 200,
			body: {
				resourceType: 'Bundle',
				entry: [
					{ resource: { resourceType: 'Observation', id: 'a' }, search: { mode: 'match' } },
					{ resource: { resourceType: 'OperationOutcome' }, search: { mode: 'outcome' } },
				],
			},
		},
	]);
	const found = await search(
		mixed.send,
		fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }),
		API,
		{ returnAll: true },
	);
	assert.deepEqual(
		found.resources.map((r) => r.resourceType),
		['Observation'],
	);
	assert.equal((found.bundle.entry as unknown[]).length, 2);

	const off = fakeSend([page(['a'], 'http://elsewhere.example/Observation?page=2')]);
	await assert.rejects(
		search(off.send, fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }), API, {
			returnAll: true,
		}),
		/next link .* is not on the credential's server/,
	);

	const loop = `${RUN_BASE}/Observation?_after=a`;
	const looping = fakeSend([page(['a'], loop), page(['b'], loop)]);
	await assert.rejects(
		search(looping.send, fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }), API, {
			returnAll: true,
		}),
		/do not end/,
	);

	const notBundle = fakeSend([{ statusCode: 200, body: '{"resourceType":"Patient"}' }]);
	await assert.rejects(
		search(notBundle.send, fhirRequest(RUN_BASE, 'search', { resourceType: 'Observation' }), API, {
			returnAll: true,
		}),
		/a Patient, not a Bundle/,
	);
});

test('runs: the start body leaves empty fields out', () => {
	assert.deepEqual(
		runStartBody('results.critical-lab', 'workflow', {
			label: ' n8n ',
			variant: '',
			timeoutSeconds: 0,
		}),
		{
			scenarioId: 'results.critical-lab',
			mode: 'workflow',
			label: 'n8n',
		},
	);
	assert.deepEqual(
		runStartBody('x', '', { timeoutSeconds: 60.4, patientDriver: 'human', revision: 'abc' }),
		{
			scenarioId: 'x',
			timeoutSeconds: 60,
			patientDriver: 'human',
			revision: 'abc',
		},
	);
	assert.throws(() => runStartBody(' ', '', {}), /empty/);
});

test('subscriptions: events, resource events and types', () => {
	const config = subscriptionConfig(
		'http://n8n/webhook/x/webhook',
		['result.final'],
		'Task.created, Task.created Communication.created',
		' DiagnosticReport ,',
	);
	assert.deepEqual(config, {
		url: 'http://n8n/webhook/x/webhook',
		events: ['result.final', 'Task.created', 'Communication.created'],
		resourceTypes: ['DiagnosticReport'],
	});
	assert.deepEqual(subscriptionConfig('u', ['*', 'result.final'], '', '').events, ['*']);
	assert.equal(subscriptionConfig('u', ['result.final'], '', '').resourceTypes, undefined);
	assert.throws(() => subscriptionConfig('u', [], '', ''), /at least one event/);
	const request = createRequest(API, config);
	assert.equal(request.method, 'POST');
	assert.equal(request.url, `${API}/api/webhooks`);
	assert.deepEqual(JSON.parse(request.body as string), {
		url: config.url,
		events: config.events,
		resourceTypes: ['DiagnosticReport'],
	});
	assert.ok(
		matches(
			{
				url: config.url,
				events: ['Task.created', 'result.final', 'Communication.created'],
				resourceTypes: ['DiagnosticReport'],
				enabled: true,
			},
			config,
		),
	);
	assert.ok(
		!matches(
			{ url: config.url, events: ['result.final'], resourceTypes: ['DiagnosticReport'] },
			config,
		),
	);
	assert.ok(
		!matches(
			{ url: 'http://other', events: config.events, resourceTypes: ['DiagnosticReport'] },
			config,
		),
	);
	assert.ok(
		!matches(
			{
				url: config.url,
				events: config.events,
				resourceTypes: ['DiagnosticReport'],
				enabled: false,
			},
			config,
		),
	);
	assert.ok(
		matches(
			{ url: 'u', events: ['*'], resourceTypes: null },
			subscriptionConfig('u', ['*'], '', ''),
		),
	);
});

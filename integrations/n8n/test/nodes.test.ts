// Tests run under Node's own runner and are not part of the package (only dist/ is).
/* eslint-disable @n8n/community-nodes/no-restricted-imports */
// The nodes themselves, run with stand-ins for n8n's context objects (no n8n needed).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { NodeApiError, NodeOperationError, type IDataObject } from 'n8n-workflow';

import { UnderstudyApi } from '../credentials/UnderstudyApi.credentials';
import { Understudy } from '../nodes/Understudy/Understudy.node';
import { UnderstudyTrigger } from '../nodes/UnderstudyTrigger/UnderstudyTrigger.node';
import { ApiError } from '../nodes/shared/api';
import { sign } from '../nodes/shared/signature';
import { toNodeError } from '../nodes/shared/transport';

const API = 'http://127.0.0.1:8000';
const RUN_BASE = `${API}/api/testing/runs/run_abc/fhir/r4`;
const NODE = {
	id: 'n1',
	name: 'Understudy',
	type: 'n8n-nodes-understudy.understudy',
	typeVersion: 1,
	position: [0, 0] as [number, number],
	parameters: {},
};

interface Answer {
	statusCode: number;
	body: unknown;
}

/** What n8n's helpers.httpRequestWithAuthentication is given, and fixed answers. */
function fakeHttp(answers: Answer[]) {
	const asked: IDataObject[] = [];
	const helper = async (credential: string, options: IDataObject) => {
		assert.equal(credential, 'understudyApi');
		asked.push(options);
		const answer = answers.shift();
		if (!answer) throw new Error(`unexpected ${String(options.method)} ${String(options.url)}`);
		return { ...answer, headers: {} };
	};
	return { helper, asked };
}

function executeContext(parameters: IDataObject, answers: Answer[], continueOnFail = false) {
	const http = fakeHttp(answers);
	const context = {
		getInputData: () => [{ json: {} }],
		getNodeParameter: (name: string, _i: number, fallback?: unknown) =>
			name in parameters ? parameters[name] : fallback,
		getCredentials: async () => ({ baseUrl: API + '/', apiKey: 'usk_test' }),
		getNode: () => NODE,
		continueOnFail: () => continueOnFail,
		helpers: { httpRequestWithAuthentication: http.helper },
	};
	return { context, asked: http.asked };
}

const bundle = (ids: string[], next?: string) => ({
	statusCode: 200,
	body: JSON.stringify({
		resourceType: 'Bundle',
		type: 'searchset',
		link: next ? [{ relation: 'next', url: next }] : [],
		entry: ids.map((id) => ({ resource: { resourceType: 'Observation', id } })),
	}),
});

test('the credential sends the key as a bearer token and tests it on a keyed endpoint', () => {
	const credential = new UnderstudyApi();
	assert.equal(credential.name, 'understudyApi');
	assert.equal(
		credential.authenticate.properties.headers?.Authorization,
		'=Bearer {{$credentials.apiKey}}',
	);
	assert.equal(credential.test.request.url, '/api/webhooks');
});

test('Understudy: a search follows every page and sends what n8n needs', async () => {
	const { context, asked } = executeContext(
		{
			resource: 'fhir',
			operation: 'search',
			base: 'fhirBase',
			fhirBase: RUN_BASE,
			resourceType: 'Observation',
			query: { parameter: [{ name: '_id', value: 'a,b,c' }] },
			returnAll: true,
			split: true,
		},
		[bundle(['a', 'b'], `${RUN_BASE}/Observation?_id=a,b,c&_after=b`), bundle(['c'])],
	);
	const [items] = await new Understudy().execute.call(context as never);
	assert.deepEqual(
		items.map((i) => i.json.id),
		['a', 'b', 'c'],
	);
	assert.deepEqual(
		asked.map((o) => o.url),
		[`${RUN_BASE}/Observation?_id=a%2Cb%2Cc`, `${RUN_BASE}/Observation?_id=a,b,c&_after=b`],
	);
	for (const options of asked) {
		assert.equal((options.headers as IDataObject).Accept, 'application/json');
		assert.equal(options.encoding, 'text');
		assert.equal(options.returnFullResponse, true);
		assert.equal(options.ignoreHttpStatusErrors, true);
	}
});

test('Understudy: a search as one Bundle item, up to a limit', async () => {
	const { context } = executeContext(
		{
			resource: 'fhir',
			operation: 'search',
			base: 'run',
			runId: 'run_abc',
			resourceType: 'Observation',
			returnAll: false,
			limit: 1,
			split: false,
		},
		[bundle(['a', 'b'], `${RUN_BASE}/Observation?_after=b`)],
	);
	const [items] = await new Understudy().execute.call(context as never);
	assert.equal(items.length, 1);
	assert.equal(items[0].json.resourceType, 'Bundle');
	assert.deepEqual(
		(items[0].json.entry as IDataObject[]).map((e) => (e.resource as IDataObject).id),
		['a'],
	);
});

test('Understudy: a conditional create on the tenant base', async () => {
	const { context, asked } = executeContext(
		{
			resource: 'fhir',
			operation: 'conditionalCreate',
			base: 'tenant',
			resourceType: 'Task',
			body: '{"status": "requested"}',
			ifNoneExist: 'identifier=urn:x|1',
		},
		[{ statusCode: 201, body: '{"resourceType":"Task","id":"t1","status":"requested"}' }],
	);
	const [items] = await new Understudy().execute.call(context as never);
	assert.deepEqual(items[0].json, { resourceType: 'Task', id: 't1', status: 'requested' });
	assert.equal(asked[0].method, 'POST');
	assert.equal(asked[0].url, `${API}/api/fhir/r4/Task`);
	assert.equal((asked[0].headers as IDataObject)['If-None-Exist'], 'identifier=urn:x|1');
	assert.deepEqual(JSON.parse(asked[0].body as string), {
		status: 'requested',
		resourceType: 'Task',
	});
});

test('Understudy: an OperationOutcome answer is a NodeApiError with its diagnostics', async () => {
	const outcome = {
		resourceType: 'OperationOutcome',
		issue: [{ severity: 'error', code: 'not-found', diagnostics: 'Patient/nope is not known' }],
	};
	const parameters = {
		resource: 'fhir',
		operation: 'read',
		base: 'run',
		runId: 'run_abc',
		resourceType: 'Patient',
		id: 'nope',
	};
	const failing = executeContext(parameters, [{ statusCode: 404, body: JSON.stringify(outcome) }]);
	await assert.rejects(
		new Understudy().execute.call(failing.context as never),
		(error: NodeApiError) => {
			assert.ok(error instanceof NodeApiError);
			assert.equal(error.message, 'Understudy answered 404: Patient/nope is not known');
			assert.equal(error.httpCode, '404');
			return true;
		},
	);
	const continuing = executeContext(
		parameters,
		[{ statusCode: 404, body: JSON.stringify(outcome) }],
		true,
	);
	const [items] = await new Understudy().execute.call(continuing.context as never);
	assert.equal(items[0].json.error, 'Understudy answered 404: Patient/nope is not known');
	// A fhirBase elsewhere never gets the key.
	const elsewhere = executeContext(
		{ ...parameters, base: 'fhirBase', fhirBase: 'http://evil.example/fhir' },
		[],
	);
	await assert.rejects(
		new Understudy().execute.call(elsewhere.context as never),
		(error: Error) =>
			error instanceof NodeOperationError && /not on the credential's server/.test(error.message),
	);
});

test('Understudy: runs start, get and finish', async () => {
	const start = executeContext(
		{
			resource: 'run',
			operation: 'start',
			scenarioId: 'results.critical-lab',
			mode: 'workflow',
			additionalFields: { label: 'n8n' },
		},
		[{ statusCode: 201, body: '{"id":"run_abc","status":"live"}' }],
	);
	const [started] = await new Understudy().execute.call(start.context as never);
	assert.equal(started[0].json.id, 'run_abc');
	assert.equal(start.asked[0].url, `${API}/api/testing/runs`);
	assert.deepEqual(JSON.parse(start.asked[0].body as string), {
		scenarioId: 'results.critical-lab',
		mode: 'workflow',
		label: 'n8n',
	});
	const finish = executeContext({ resource: 'run', operation: 'finish', runId: 'run_abc' }, [
		{ statusCode: 200, body: '{"id":"run_abc","status":"passed","passed":true}' },
	]);
	const [verdict] = await new Understudy().execute.call(finish.context as never);
	assert.equal(verdict[0].json.passed, true);
	assert.equal(finish.asked[0].method, 'POST');
	assert.equal(finish.asked[0].url, `${API}/api/testing/runs/run_abc/finish`);
	const get = executeContext({ resource: 'run', operation: 'get', runId: 'run_abc' }, [
		{ statusCode: 404, body: '{"title":"no run","status":404,"detail":"no run \'run_abc\'"}' },
	]);
	await assert.rejects(
		new Understudy().execute.call(get.context as never),
		/Understudy answered 404: no run 'run_abc'/,
	);
});

test('toNodeError: answers become NodeApiError, the rest NodeOperationError', () => {
	const api = toNodeError(
		NODE,
		new ApiError(
			'Understudy answered 422: bad',
			422,
			{ resourceType: 'OperationOutcome' },
			'POST x',
		),
	);
	assert.ok(api instanceof NodeApiError);
	assert.equal(api.message, 'Understudy answered 422: bad');
	assert.equal((api as NodeApiError).description, 'POST x');
	assert.ok(
		toNodeError(NODE, new ApiError('no base', undefined, undefined)) instanceof NodeOperationError,
	);
});

// --- the trigger ---------------------------------------------------------------------

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const HOOK_URL = 'http://127.0.0.1:5678/webhook/abc/webhook';

function hookContext(staticData: IDataObject, answers: Answer[], parameters: IDataObject = {}) {
	const http = fakeHttp(answers);
	const params: IDataObject = {
		events: ['result.final'],
		options: { resourceTypes: 'DiagnosticReport' },
		...parameters,
	};
	const context = {
		getWorkflowStaticData: () => staticData,
		getNodeParameter: (name: string, fallback?: unknown) =>
			name in params ? params[name] : fallback,
		getNodeWebhookUrl: () => HOOK_URL,
		getCredentials: async () => ({ baseUrl: API, apiKey: 'usk_test' }),
		getNode: () => NODE,
		helpers: { httpRequestWithAuthentication: http.helper },
	};
	return { context, asked: http.asked };
}

test('trigger: activation subscribes and keeps the id and secret; deactivation deletes', async () => {
	const hooks = new UnderstudyTrigger().webhookMethods.default;
	const data: IDataObject = {};
	const created = hookContext(data, [
		{
			statusCode: 201,
			body: JSON.stringify({ id: 'wh_1', secret: SECRET, url: HOOK_URL, events: ['result.final'] }),
		},
	]);
	assert.equal(await hooks.checkExists.call(created.context as never), false);
	assert.equal(await hooks.create.call(created.context as never), true);
	assert.deepEqual(data, { subscriptionId: 'wh_1', secret: SECRET });
	assert.equal(created.asked[0].url, `${API}/api/webhooks`);
	assert.deepEqual(JSON.parse(created.asked[0].body as string), {
		url: HOOK_URL,
		events: ['result.final'],
		resourceTypes: ['DiagnosticReport'],
	});

	const same = hookContext(data, [
		{
			statusCode: 200,
			body: JSON.stringify({
				id: 'wh_1',
				url: HOOK_URL,
				events: ['result.final'],
				resourceTypes: ['DiagnosticReport'],
				enabled: true,
			}),
		},
	]);
	assert.equal(await hooks.checkExists.call(same.context as never), true);
	assert.equal(same.asked[0].url, `${API}/api/webhooks/wh_1`);

	const changed = hookContext({ ...data }, [
		{
			statusCode: 200,
			body: JSON.stringify({
				id: 'wh_1',
				url: HOOK_URL,
				events: ['result.final'],
				resourceTypes: null,
			}),
		},
		{ statusCode: 204, body: '' },
	]);
	assert.equal(
		await hooks.checkExists.call(changed.context as never),
		false,
		'other filters: replaced',
	);
	assert.equal(changed.asked[1].method, 'DELETE');

	const gone = hookContext({ ...data }, [
		{ statusCode: 404, body: '{"title":"no webhook","status":404,"detail":"no webhook"}' },
	]);
	assert.equal(await hooks.checkExists.call(gone.context as never), false);

	const removed = hookContext(data, [{ statusCode: 204, body: '' }]);
	assert.equal(await hooks.delete.call(removed.context as never), true);
	assert.equal(removed.asked[0].method, 'DELETE');
	assert.equal(removed.asked[0].url, `${API}/api/webhooks/wh_1`);
	assert.deepEqual(data, {});

	const refused = hookContext({}, [
		{
			statusCode: 422,
			body: JSON.stringify({
				title: 'invalid',
				status: 422,
				detail: 'invalid',
				errors: [{ path: 'url', message: 'not allowed' }],
			}),
		},
	]);
	await assert.rejects(
		hooks.create.call(refused.context as never),
		(error: Error) =>
			error instanceof NodeApiError && /invalid \(url: not allowed\)/.test(error.message),
	);
});

function webhookContext(
	secret: string | undefined,
	headers: IDataObject,
	rawBody: Buffer | undefined,
) {
	const response = { statusCode: 200, sent: undefined as unknown };
	const res = {
		status(code: number) {
			response.statusCode = code;
			return res;
		},
		json(body: unknown) {
			response.sent = body;
			return res;
		},
	};
	const context = {
		getRequestObject: () => ({ headers, rawBody, body: {} }),
		getResponseObject: () => res,
		getWorkflowStaticData: () => (secret ? { subscriptionId: 'wh_1', secret } : {}),
		helpers: { returnJsonArray: (value: IDataObject) => [{ json: value }] },
	};
	return { context, response };
}

test('trigger: a signed delivery starts the workflow with the event, resource as JSON', async () => {
	const event = {
		id: 'dlv_1',
		type: 'result.final',
		runId: 'run_abc',
		fhirBase: RUN_BASE,
		resource: { resourceType: 'DiagnosticReport', id: 'r1' },
	};
	const raw = Buffer.from(JSON.stringify(event));
	const now = Math.floor(Date.now() / 1000);
	const headers = {
		'webhook-id': 'dlv_1',
		'webhook-timestamp': String(now),
		'webhook-signature': sign(SECRET, 'dlv_1', now, raw),
	};
	const trigger = new UnderstudyTrigger();
	const good = webhookContext(SECRET, headers, raw);
	const result = await trigger.webhook.call(good.context as never);
	assert.deepEqual(result.workflowData, [[{ json: event }]]);
	assert.equal(
		((result.workflowData as never)[0][0] as { json: IDataObject }).json.resource &&
			typeof event.resource,
		'object',
	);

	for (const [why, context] of [
		[
			'tampered',
			webhookContext(
				SECRET,
				headers,
				Buffer.from(JSON.stringify({ ...event, runId: 'run_other' })),
			),
		],
		[
			'old',
			webhookContext(
				SECRET,
				{
					...headers,
					'webhook-timestamp': String(now - 600),
					'webhook-signature': sign(SECRET, 'dlv_1', now - 600, raw),
				},
				raw,
			),
		],
		['unsigned', webhookContext(SECRET, {}, raw)],
		['not subscribed', webhookContext(undefined, headers, raw)],
		['no raw body', webhookContext(SECRET, headers, undefined)],
	] as const) {
		const answer = await trigger.webhook.call(context.context as never);
		assert.deepEqual(answer, { noWebhookResponse: true }, why);
		assert.equal(context.response.statusCode, 401, why);
		assert.match(String((context.response.sent as IDataObject).error), /./, why);
	}
});

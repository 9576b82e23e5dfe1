import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import {
	RUNS_PATH,
	apiRequest,
	call,
	fhirBaseFor,
	fhirRequest,
	search,
	type BaseKind,
	type FhirOperation,
} from '../shared/api';
import { runStartBody } from '../shared/runs';
import { baseUrl, sender, toNodeError } from '../shared/transport';

const fhir = { resource: ['fhir'] };
const run = { resource: ['run'] };
const onOne = ['read', 'update', 'patch', 'delete'];
const withBody = ['create', 'conditionalCreate', 'update'];

const fhirProperties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: fhir },
		default: 'read',
		options: [
			{
				name: 'Conditional Create',
				value: 'conditionalCreate',
				action: 'Create a resource unless one matches',
				description: 'POST with If-None-Exist: no second resource when one matches the criteria',
			},
			{ name: 'Create', value: 'create', action: 'Create a resource', description: 'POST [type]' },
			{
				name: 'Delete',
				value: 'delete',
				action: 'Delete a resource',
				description: 'DELETE [type]/[ID]',
			},
			{
				name: 'Patch',
				value: 'patch',
				action: 'Patch a resource',
				description: 'PATCH [type]/[ID] with a JSON Patch or a JSON merge patch',
			},
			{ name: 'Read', value: 'read', action: 'Read a resource', description: 'GET [type]/[ID]' },
			{
				name: 'Search',
				value: 'search',
				action: 'Search resources',
				description: 'GET [type]?params, every page or up to a limit',
			},
			{
				name: 'Update',
				value: 'update',
				action: 'Update a resource',
				description: 'PUT [type]/[ID]',
			},
		],
	},
	{
		displayName: 'FHIR Base',
		name: 'base',
		type: 'options',
		displayOptions: { show: fhir },
		default: 'fhirBase',
		description: 'Which FHIR base to talk to',
		options: [
			{
				name: 'FHIR Base URL',
				value: 'fhirBase',
				description: "A base URL, e.g. the trigger event's fhirBase (the run's own view)",
			},
			{
				name: 'Run ID',
				value: 'run',
				description: "The run's view: [Base URL]/api/testing/runs/[ID]/fhir/r4",
			},
			{ name: 'Tenant', value: 'tenant', description: "The tenant's base: [Base URL]/api/fhir/r4" },
		],
	},
	{
		displayName: 'FHIR Base URL',
		name: 'fhirBase',
		type: 'string',
		required: true,
		displayOptions: { show: { ...fhir, base: ['fhirBase'] } },
		default: '',
		placeholder: "={{ $('Understudy Trigger').item.json.fhirBase }}",
		description: "Must be on the credential's Base URL (the key is sent only there)",
	},
	{
		displayName: 'Run ID',
		name: 'runId',
		type: 'string',
		required: true,
		displayOptions: { show: { ...fhir, base: ['run'] } },
		default: '',
		placeholder: 'run_…',
	},
	{
		displayName: 'Resource Type',
		name: 'resourceType',
		type: 'string',
		required: true,
		displayOptions: { show: fhir },
		default: '',
		placeholder: 'Observation',
	},
	{
		displayName: 'Resource ID',
		name: 'id',
		type: 'string',
		required: true,
		displayOptions: { show: { ...fhir, operation: onOne } },
		default: '',
		description: 'The ID, or a reference such as ServiceRequest/123',
	},
	{
		displayName: 'Resource',
		name: 'body',
		type: 'json',
		required: true,
		displayOptions: { show: { ...fhir, operation: withBody } },
		default: '{\n  "resourceType": ""\n}',
		description:
			'The resource as JSON (its resourceType and, for an update, its ID are filled in when left out)',
	},
	{
		displayName: 'If-None-Exist',
		name: 'ifNoneExist',
		type: 'string',
		required: true,
		displayOptions: { show: { ...fhir, operation: ['conditionalCreate'] } },
		default: '',
		placeholder: 'identifier=urn:example:events|evt_123',
		description: 'Search criteria: when a resource matches, it is returned and nothing is created',
	},
	{
		displayName: 'Patch Format',
		name: 'patchFormat',
		type: 'options',
		displayOptions: { show: { ...fhir, operation: ['patch'] } },
		default: 'mergePatch',
		options: [
			{
				name: 'JSON Merge Patch',
				value: 'mergePatch',
				description: 'An object of the fields to change (RFC 7396)',
			},
			{ name: 'JSON Patch', value: 'jsonPatch', description: 'An array of operations (RFC 6902)' },
		],
	},
	{
		displayName: 'Patch',
		name: 'patch',
		type: 'json',
		required: true,
		displayOptions: { show: { ...fhir, operation: ['patch'] } },
		default: '{}',
	},
	{
		displayName: 'Search Parameters',
		name: 'query',
		type: 'fixedCollection',
		typeOptions: { multipleValues: true },
		placeholder: 'Add parameter',
		displayOptions: { show: { ...fhir, operation: ['search'] } },
		default: {},
		options: [
			{
				name: 'parameter',
				displayName: 'Parameter',
				values: [
					{
						displayName: 'Name',
						name: 'name',
						type: 'string',
						default: '',
						placeholder: 'patient',
					},
					{ displayName: 'Value', name: 'value', type: 'string', default: '' },
				],
			},
		],
	},
	{
		displayName: 'Return All',
		name: 'returnAll',
		type: 'boolean',
		displayOptions: { show: { ...fhir, operation: ['search'] } },
		default: false,
		description: 'Whether to return all results or only up to a given limit',
	},
	{
		displayName: 'Limit',
		name: 'limit',
		type: 'number',
		typeOptions: { minValue: 1 },
		displayOptions: { show: { ...fhir, operation: ['search'], returnAll: [false] } },
		default: 50,
		description: 'Max number of results to return',
	},
	{
		displayName: 'Split Into Items',
		name: 'split',
		type: 'boolean',
		displayOptions: { show: { ...fhir, operation: ['search'] } },
		default: true,
		description:
			"Whether to output one item per resource; off: one item, a searchset Bundle with every page's entries",
	},
];

const runProperties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		displayOptions: { show: run },
		default: 'start',
		options: [
			{
				name: 'Finish',
				value: 'finish',
				action: 'Finish a run',
				description: 'Grade now and end the run; outputs the verdict',
			},
			{
				name: 'Get',
				value: 'get',
				action: 'Get a run',
				description: 'Progress while live, the verdict once ended',
			},
			{
				name: 'Start',
				value: 'start',
				action: 'Start a run',
				description: 'Start a run of a scenario',
			},
		],
	},
	{
		displayName: 'Scenario ID',
		name: 'scenarioId',
		type: 'string',
		required: true,
		displayOptions: { show: { ...run, operation: ['start'] } },
		default: '',
		placeholder: 'results.critical-lab',
	},
	{
		displayName: 'Mode',
		name: 'mode',
		type: 'options',
		displayOptions: { show: { ...run, operation: ['start'] } },
		default: '',
		options: [
			{ name: "The Scenario's First", value: '' },
			{ name: 'Agent', value: 'agent' },
			{ name: 'Workflow', value: 'workflow' },
		],
	},
	{
		displayName: 'Additional Fields',
		name: 'additionalFields',
		type: 'collection',
		placeholder: 'Add field',
		displayOptions: { show: { ...run, operation: ['start'] } },
		default: {},
		options: [
			{ displayName: 'Label', name: 'label', type: 'string', default: '' },
			{
				displayName: 'Patient Driver',
				name: 'patientDriver',
				type: 'options',
				default: 'sim',
				description: 'For a scenario with a simulated patient: who answers',
				options: [
					{ name: 'Simulated Patient', value: 'sim' },
					{ name: 'A Person (From the Console)', value: 'human' },
				],
			},
			{
				displayName: 'Revision',
				name: 'revision',
				type: 'string',
				default: '',
				description: 'The revision of the system under test, e.g. a commit',
			},
			{
				displayName: 'Timeout (Seconds)',
				name: 'timeoutSeconds',
				type: 'number',
				default: 0,
				description: "The run's deadline; 0: the scenario's",
			},
			{
				displayName: 'Variant',
				name: 'variant',
				type: 'string',
				default: '',
				description: 'A persona variant of the scenario',
			},
		],
	},
	{
		displayName: 'Run ID',
		name: 'runId',
		type: 'string',
		required: true,
		displayOptions: { show: { ...run, operation: ['get', 'finish'] } },
		default: '',
		placeholder: 'run_…',
	},
];

export class Understudy implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Understudy',
		name: 'understudy',
		icon: {
			light: 'file:../../icons/understudy.svg',
			dark: 'file:../../icons/understudy.dark.svg',
		},
		group: ['transform'],
		version: 1,
		subtitle:
			'={{$parameter["operation"] + ($parameter["resourceType"] ? ": " + $parameter["resourceType"] : "")}}',
		description: "FHIR reads and writes on an Understudy run's base or the tenant's, and test runs",
		defaults: { name: 'Understudy' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		credentials: [{ name: 'understudyApi', required: true }],
		properties: [
			{
				displayName: 'Resource',
				name: 'resource',
				type: 'options',
				noDataExpression: true,
				default: 'fhir',
				options: [
					{ name: 'FHIR Resource', value: 'fhir' },
					{ name: 'Run', value: 'run' },
				],
			},
			...fhirProperties,
			...runProperties,
		],
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const out: INodeExecutionData[] = [];
		const send = sender(this);
		const base = await baseUrl(this);
		for (let i = 0; i < items.length; i++) {
			try {
				const resource = this.getNodeParameter('resource', i) as string;
				const operation = this.getNodeParameter('operation', i) as string;
				const results =
					resource === 'run'
						? await runOperation(this, send, base, operation, i)
						: await fhirOperation(this, send, base, operation as FhirOperation, i);
				for (const json of results) out.push({ json, pairedItem: { item: i } });
			} catch (error) {
				const nodeError = toNodeError(this.getNode(), error, i);
				if (this.continueOnFail()) {
					out.push({
						json: {
							error: nodeError.message,
							...((nodeError as { description?: string }).description
								? { description: (nodeError as { description?: string }).description }
								: {}),
						},
						pairedItem: { item: i },
					});
					continue;
				}
				throw nodeError;
			}
		}
		return [out];
	}
}

async function fhirOperation(
	context: IExecuteFunctions,
	send: ReturnType<typeof sender>,
	base: string,
	operation: FhirOperation,
	i: number,
): Promise<IDataObject[]> {
	const kind = context.getNodeParameter('base', i) as BaseKind;
	const fhirBase = fhirBaseFor(kind, base, {
		runId: kind === 'run' ? (context.getNodeParameter('runId', i) as string) : undefined,
		fhirBase: kind === 'fhirBase' ? (context.getNodeParameter('fhirBase', i) as string) : undefined,
	});
	const resourceType = context.getNodeParameter('resourceType', i) as string;
	const param = (name: string, fallback: unknown = '') =>
		context.getNodeParameter(name, i, fallback);
	if (operation === 'search') {
		const pairs = ((param('query', {}) as IDataObject).parameter ?? []) as Array<{
			name: string;
			value: string;
		}>;
		const request = fhirRequest(fhirBase, 'search', {
			resourceType,
			query: pairs.map((p) => [p.name, String(p.value ?? '')] as [string, string]),
		});
		const returnAll = param('returnAll', false) as boolean;
		const found = await search(send, request, base, {
			returnAll,
			limit: returnAll ? undefined : (param('limit', 50) as number),
		});
		return (param('split', true) as boolean) ? found.resources : [found.bundle];
	}
	const request = fhirRequest(fhirBase, operation, {
		resourceType,
		id: onOne.includes(operation) ? (param('id') as string) : undefined,
		resource: withBody.includes(operation) ? param('body') : undefined,
		ifNoneExist: operation === 'conditionalCreate' ? (param('ifNoneExist') as string) : undefined,
		patch: operation === 'patch' ? param('patch') : undefined,
		patchFormat:
			operation === 'patch'
				? (param('patchFormat', 'mergePatch') as 'jsonPatch' | 'mergePatch')
				: undefined,
	});
	const { statusCode, body } = await call(send, request);
	if (operation === 'delete') {
		return [{ resourceType, id: request.url.split('/').pop(), deleted: true, statusCode }];
	}
	if (body && typeof body === 'object' && !Array.isArray(body)) return [body as IDataObject];
	return [{ statusCode }];
}

async function runOperation(
	context: IExecuteFunctions,
	send: ReturnType<typeof sender>,
	base: string,
	operation: string,
	i: number,
): Promise<IDataObject[]> {
	let request;
	if (operation === 'start') {
		request = apiRequest(
			'POST',
			base + RUNS_PATH,
			runStartBody(
				context.getNodeParameter('scenarioId', i) as string,
				context.getNodeParameter('mode', i, '') as string,
				context.getNodeParameter('additionalFields', i, {}) as IDataObject,
			),
		);
	} else {
		const runId = encodeURIComponent((context.getNodeParameter('runId', i) as string).trim());
		request =
			operation === 'finish'
				? apiRequest('POST', `${base}${RUNS_PATH}/${runId}/finish`)
				: apiRequest('GET', `${base}${RUNS_PATH}/${runId}`);
	}
	const { body } = await call(send, request);
	return [body as IDataObject];
}

import type {
	IDataObject,
	IHookFunctions,
	INodeType,
	INodeTypeDescription,
	IWebhookFunctions,
	IWebhookResponseData,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

import { ApiError, call } from '../shared/api';
import { verifySignature } from '../shared/signature';
import {
	createRequest,
	deleteRequest,
	getRequest,
	matches,
	subscriptionConfig,
	type SubscriptionConfig,
} from '../shared/subscription';
import { baseUrl, sender, toNodeError } from '../shared/transport';

function wanted(context: IHookFunctions): SubscriptionConfig {
	const options = context.getNodeParameter('options', {}) as IDataObject;
	try {
		return subscriptionConfig(
			context.getNodeWebhookUrl('default') as string,
			context.getNodeParameter('events', []),
			options.resourceEvents,
			options.resourceTypes,
		);
	} catch (error) {
		throw toNodeError(
			context.getNode(),
			new ApiError((error as Error).message, undefined, undefined),
		);
	}
}

// A trigger is no tool for an AI agent: it starts workflows, it is not called by them.
// eslint-disable-next-line @n8n/community-nodes/node-usable-as-tool
export class UnderstudyTrigger implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Understudy Trigger',
		name: 'understudyTrigger',
		icon: {
			light: 'file:../../icons/understudy.svg',
			dark: 'file:../../icons/understudy.dark.svg',
		},
		group: ['trigger'],
		version: 1,
		subtitle: '={{$parameter["events"].join(", ")}}',
		description:
			'Starts the workflow on Understudy events (a final lab result, a portal message, …), signed deliveries only',
		defaults: { name: 'Understudy Trigger' },
		inputs: [],
		outputs: [NodeConnectionTypes.Main],
		credentials: [{ name: 'understudyApi', required: true }],
		webhooks: [
			{
				name: 'default',
				httpMethod: 'POST',
				responseMode: 'onReceived',
				path: 'webhook',
			},
		],
		properties: [
			{
				displayName:
					"Activating the workflow subscribes this URL to the events at Understudy; deactivating it deletes the subscription. Every delivery is checked against the subscription's signing secret.",
				name: 'notice',
				type: 'notice',
				default: '',
			},
			{
				displayName: 'Events',
				name: 'events',
				type: 'multiOptions',
				required: true,
				default: ['result.final'],
				description: 'The events that start the workflow',
				options: [
					{ name: 'All Events', value: '*', description: 'Every event of the tenant' },
					{
						name: 'Appointment No-Show',
						value: 'appointment.noshow',
						description: 'An appointment was marked noshow',
					},
					{
						name: 'Eval Completed',
						value: 'eval.completed',
						description: "An eval's runs have all ended",
					},
					{
						name: 'Eval Regressed',
						value: 'eval.regressed',
						description: 'An eval compares worse than its baseline',
					},
					{
						name: 'Message Received',
						value: 'message.received',
						description: 'A patient sent a message (a Communication from a Patient)',
					},
					{
						name: 'Result Final',
						value: 'result.final',
						description: 'A lab report (DiagnosticReport) was filed final',
					},
				],
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add option',
				default: {},
				options: [
					{
						displayName: 'Resource Events',
						name: 'resourceEvents',
						type: 'string',
						default: '',
						placeholder: 'Task.created, Communication.updated',
						description:
							'More events, comma-separated: [ResourceType].created, .updated or .deleted',
					},
					{
						displayName: 'Resource Types',
						name: 'resourceTypes',
						type: 'string',
						default: '',
						placeholder: 'DiagnosticReport, Observation',
						description:
							'Only events about these resource types, comma-separated (eval events are not filtered)',
					},
				],
			},
		],
	};

	webhookMethods = {
		default: {
			async checkExists(this: IHookFunctions): Promise<boolean> {
				const data = this.getWorkflowStaticData('node');
				const id = data.subscriptionId as string | undefined;
				if (!id || !data.secret) return false;
				const send = sender(this);
				const base = await baseUrl(this);
				try {
					const { body } = await call(send, getRequest(base, id));
					if (matches(body as IDataObject, wanted(this))) return true;
					// Another URL or other events: replace it.
					await call(send, deleteRequest(base, id)).catch(() => undefined);
				} catch (error) {
					if (!(error instanceof ApiError && error.statusCode === 404)) {
						throw toNodeError(this.getNode(), error);
					}
				}
				delete data.subscriptionId;
				delete data.secret;
				return false;
			},

			async create(this: IHookFunctions): Promise<boolean> {
				const data = this.getWorkflowStaticData('node');
				let created: IDataObject;
				try {
					const { body } = await call(
						sender(this),
						createRequest(await baseUrl(this), wanted(this)),
					);
					created = (body ?? {}) as IDataObject;
				} catch (error) {
					throw toNodeError(this.getNode(), error);
				}
				if (typeof created.id !== 'string' || typeof created.secret !== 'string') {
					throw new NodeOperationError(
						this.getNode(),
						'The subscription Understudy answered has no id or secret',
					);
				}
				data.subscriptionId = created.id;
				data.secret = created.secret;
				return true;
			},

			async delete(this: IHookFunctions): Promise<boolean> {
				const data = this.getWorkflowStaticData('node');
				const id = data.subscriptionId as string | undefined;
				if (id) {
					try {
						await call(sender(this), deleteRequest(await baseUrl(this), id));
					} catch (error) {
						if (!(error instanceof ApiError && error.statusCode === 404)) return false;
					}
				}
				delete data.subscriptionId;
				delete data.secret;
				return true;
			},
		},
	};

	async webhook(this: IWebhookFunctions): Promise<IWebhookResponseData> {
		const request = this.getRequestObject();
		const response = this.getResponseObject();
		const refuse = (status: number, reason: string): IWebhookResponseData => {
			response.status(status).json({ error: reason });
			return { noWebhookResponse: true };
		};
		const secret = this.getWorkflowStaticData('node').secret as string | undefined;
		if (!secret) return refuse(401, 'not subscribed: no signing secret (re-activate the workflow)');
		// The exact bytes Understudy signed; n8n keeps them next to the parsed body.
		const raw = (request as unknown as { rawBody?: Buffer }).rawBody;
		if (!raw || !raw.length) return refuse(401, 'no request body to verify');
		const verdict = verifySignature({ secret, headers: request.headers, body: raw });
		if (!verdict.ok) return refuse(401, `signature refused: ${verdict.reason}`);
		let event: unknown;
		try {
			event = JSON.parse(raw.toString('utf8'));
		} catch {
			return refuse(400, 'the body is not JSON');
		}
		if (!event || typeof event !== 'object' || Array.isArray(event)) {
			return refuse(400, 'the body is not a JSON object');
		}
		return { workflowData: [this.helpers.returnJsonArray(event as IDataObject)] };
	}
}

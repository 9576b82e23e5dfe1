// The n8n side of api.ts: requests sent with the Understudy credential through n8n's
// helper, and ApiError turned into n8n's own errors.
import {
	NodeApiError,
	NodeOperationError,
	type IExecuteFunctions,
	type IHookFunctions,
	type ILoadOptionsFunctions,
	type INode,
	type JsonObject,
} from 'n8n-workflow';

import { ApiError, CREDENTIAL_NAME, apiBase, type Send } from './api';

type Context = IExecuteFunctions | IHookFunctions | ILoadOptionsFunctions;

/** Requests with `Authorization: Bearer <key>`; the body comes back as text and api.ts parses it. */
export function sender(context: Context): Send {
	return async (request) => {
		const answer = (await context.helpers.httpRequestWithAuthentication.call(
			context,
			CREDENTIAL_NAME,
			{
				method: request.method,
				url: request.url,
				headers: request.headers,
				body: request.body,
				encoding: 'text',
				json: false,
				returnFullResponse: true,
				ignoreHttpStatusErrors: true,
			},
		)) as { statusCode: number; headers?: Record<string, unknown>; body: unknown };
		return { statusCode: answer.statusCode, headers: answer.headers, body: answer.body };
	};
}

export async function baseUrl(context: Context): Promise<string> {
	const credentials = await context.getCredentials(CREDENTIAL_NAME);
	return apiBase(String(credentials.baseUrl ?? ''));
}

/** An ApiError as n8n's error: NodeApiError for an answer, NodeOperationError otherwise. */
export function toNodeError(node: INode, error: unknown, itemIndex?: number): Error {
	if (error instanceof NodeApiError || error instanceof NodeOperationError) return error;
	if (error instanceof ApiError) {
		if (error.statusCode !== undefined) {
			const body =
				error.body && typeof error.body === 'object'
					? (error.body as JsonObject)
					: ({ body: error.body === undefined ? null : String(error.body) } as JsonObject);
			return new NodeApiError(node, body, {
				message: error.message,
				description: error.description,
				httpCode: String(error.statusCode),
				itemIndex,
			});
		}
		return new NodeOperationError(node, error.message, { itemIndex });
	}
	return new NodeOperationError(node, error as Error, { itemIndex });
}

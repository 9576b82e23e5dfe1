// Requests to Understudy, kept free of n8n's runtime so that they can be tested alone:
// building FHIR and testing-API requests, parsing every answer as JSON, turning an error
// answer (a FHIR OperationOutcome, or problem+json elsewhere) into readable text, and
// following a search's Bundle pages.
import type { IDataObject, IHttpRequestMethods } from 'n8n-workflow';

export const CREDENTIAL_NAME = 'understudyApi';
export const TENANT_FHIR_PATH = '/api/fhir/r4';
export const RUNS_PATH = '/api/testing/runs';
export const WEBHOOKS_PATH = '/api/webhooks';

export interface ApiRequest {
	method: IHttpRequestMethods;
	url: string;
	headers: Record<string, string>;
	body?: string;
}

export interface HttpAnswer {
	statusCode: number;
	headers?: Record<string, unknown>;
	body: unknown;
}

/** Sends one request with the credential's key (n8n's helper, or a stub in the tests). */
export type Send = (request: ApiRequest) => Promise<HttpAnswer>;

/** An answer that is not 2xx, or not JSON: `message` is what the node shows. */
export class ApiError extends Error {
	constructor(
		message: string,
		readonly statusCode: number | undefined,
		readonly body: unknown,
		readonly description?: string,
	) {
		super(message);
		this.name = 'ApiError';
	}
}

export function trimSlashes(url: string): string {
	return url.trim().replace(/\/+$/, '');
}

function parsedUrl(url: string, what: string): URL {
	try {
		return new URL(url);
	} catch {
		throw new ApiError(`${what} is not a URL: '${url}'`, undefined, undefined);
	}
}

/** The credential's base URL, checked: http(s), no query. */
export function apiBase(baseUrl: string): string {
	const base = trimSlashes(baseUrl ?? '');
	const url = parsedUrl(base, "The credential's Base URL");
	if (url.protocol !== 'http:' && url.protocol !== 'https:') {
		throw new ApiError(
			`The credential's Base URL must be http(s): '${base}'`,
			undefined,
			undefined,
		);
	}
	return base;
}

/**
 * The key goes only to the credential's server: a URL taken from elsewhere (a FHIR base
 * from an event payload, a Bundle's next link) must be under the credential's base URL.
 */
export function assertUnderBase(url: string, base: string, what: string): string {
	const target = parsedUrl(url, what);
	const root = parsedUrl(base, "The credential's Base URL");
	const rootPath = root.pathname.replace(/\/+$/, '');
	if (
		target.origin !== root.origin ||
		(rootPath && target.pathname !== rootPath && !target.pathname.startsWith(rootPath + '/'))
	) {
		throw new ApiError(
			`${what} '${url}' is not on the credential's server (${base}): the API key is sent only there. ` +
				"Start the run on the same URL as the credential's Base URL, or fix the Base URL.",
			undefined,
			undefined,
		);
	}
	return url;
}

export type BaseKind = 'run' | 'fhirBase' | 'tenant';

/** The FHIR base to talk to: a run's view, a FHIR base URL (e.g. an event's fhirBase), or the tenant's. */
export function fhirBaseFor(
	kind: BaseKind,
	base: string,
	values: { runId?: string; fhirBase?: string },
): string {
	if (kind === 'tenant') return base + TENANT_FHIR_PATH;
	if (kind === 'run') {
		const runId = (values.runId ?? '').trim();
		if (!runId) throw new ApiError('Run ID is empty', undefined, undefined);
		return `${base}${RUNS_PATH}/${encodeURIComponent(runId)}/fhir/r4`;
	}
	const fhirBase = trimSlashes(values.fhirBase ?? '');
	if (!fhirBase) {
		throw new ApiError(
			'FHIR Base URL is empty (with a trigger event: {{ $json.fhirBase }}; events about no run have none)',
			undefined,
			undefined,
		);
	}
	return assertUnderBase(fhirBase, base, 'FHIR Base URL');
}

const TYPE = /^[A-Z][A-Za-z]{1,63}$/;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;

export function resourceType(value: string): string {
	const type = (value ?? '').trim();
	if (!TYPE.test(type))
		throw new ApiError(`'${type}' is not a FHIR resource type`, undefined, undefined);
	return type;
}

/** A resource id, or a reference `Type/id` (whose type must be the one asked). */
export function resourceId(value: string, type: string): string {
	let id = String(value ?? '').trim();
	const slash = id.lastIndexOf('/');
	if (slash >= 0) {
		const refType = id.slice(0, slash).split('/').pop();
		if (refType !== type) {
			throw new ApiError(
				`'${value}' is a reference to a ${refType}, not a ${type}`,
				undefined,
				undefined,
			);
		}
		id = id.slice(slash + 1);
	}
	if (!ID.test(id))
		throw new ApiError(`'${value}' is not a FHIR resource id`, undefined, undefined);
	return id;
}

/** A resource given as an object or as JSON text. */
export function jsonValue(value: unknown, what: string): unknown {
	if (typeof value !== 'string') return value;
	try {
		return JSON.parse(value);
	} catch (error) {
		throw new ApiError(`${what} is not JSON: ${(error as Error).message}`, undefined, undefined);
	}
}

function resourceBody(value: unknown, type: string, id?: string): IDataObject {
	const resource = jsonValue(value, 'The resource');
	if (!resource || typeof resource !== 'object' || Array.isArray(resource)) {
		throw new ApiError('The resource must be a JSON object', undefined, undefined);
	}
	const body = { ...(resource as IDataObject) };
	if (body.resourceType === undefined) body.resourceType = type;
	if (body.resourceType !== type) {
		throw new ApiError(
			`The resource is a ${String(body.resourceType)}, not a ${type}`,
			undefined,
			undefined,
		);
	}
	if (id !== undefined) {
		if (body.id === undefined) body.id = id;
		if (body.id !== id) {
			throw new ApiError(
				`The resource's id '${String(body.id)}' is not '${id}'`,
				undefined,
				undefined,
			);
		}
	}
	return body;
}

export const JSON_HEADERS = { Accept: 'application/json' };
const FHIR_JSON = 'application/fhir+json';

export type FhirOperation =
	| 'read'
	| 'search'
	| 'create'
	| 'conditionalCreate'
	| 'update'
	| 'patch'
	| 'delete';

export interface FhirInput {
	resourceType: string;
	id?: string;
	/** Search parameters as (name, value) pairs; a name may repeat. */
	query?: Array<[string, string]>;
	resource?: unknown;
	ifNoneExist?: string;
	patch?: unknown;
	patchFormat?: 'jsonPatch' | 'mergePatch';
}

export function queryString(pairs: Array<[string, string]>): string {
	const params = new URLSearchParams();
	for (const [name, value] of pairs) {
		if (name.trim()) params.append(name.trim(), value);
	}
	const text = params.toString();
	return text ? `?${text}` : '';
}

/** One FHIR interaction as an HTTP request; always `Accept: application/json`. */
export function fhirRequest(
	fhirBase: string,
	operation: FhirOperation,
	input: FhirInput,
): ApiRequest {
	const type = resourceType(input.resourceType);
	const headers: Record<string, string> = { ...JSON_HEADERS };
	const one = () => `${fhirBase}/${type}/${resourceId(input.id ?? '', type)}`;
	switch (operation) {
		case 'read':
			return { method: 'GET', url: one(), headers };
		case 'delete':
			return { method: 'DELETE', url: one(), headers };
		case 'search':
			return {
				method: 'GET',
				url: `${fhirBase}/${type}${queryString(input.query ?? [])}`,
				headers,
			};
		case 'create':
		case 'conditionalCreate': {
			headers['Content-Type'] = FHIR_JSON;
			if (operation === 'conditionalCreate') {
				const criteria = (input.ifNoneExist ?? '').trim().replace(/^\?/, '');
				if (!criteria) {
					throw new ApiError(
						'If-None-Exist is empty: give search criteria, e.g. identifier=system|value',
						undefined,
						undefined,
					);
				}
				headers['If-None-Exist'] = criteria;
			}
			const body = resourceBody(input.resource, type);
			return { method: 'POST', url: `${fhirBase}/${type}`, headers, body: JSON.stringify(body) };
		}
		case 'update': {
			const id = resourceId(input.id ?? '', type);
			headers['Content-Type'] = FHIR_JSON;
			const body = resourceBody(input.resource, type, id);
			return {
				method: 'PUT',
				url: `${fhirBase}/${type}/${id}`,
				headers,
				body: JSON.stringify(body),
			};
		}
		case 'patch': {
			const patch = jsonValue(input.patch, 'The patch');
			const format = input.patchFormat ?? (Array.isArray(patch) ? 'jsonPatch' : 'mergePatch');
			if (format === 'jsonPatch' && !Array.isArray(patch)) {
				throw new ApiError(
					'A JSON Patch is an array of operations, e.g. [{"op": "replace", "path": "/status", "value": "completed"}]',
					undefined,
					undefined,
				);
			}
			if (
				format === 'mergePatch' &&
				(!patch || typeof patch !== 'object' || Array.isArray(patch))
			) {
				throw new ApiError(
					'A JSON merge patch is an object, e.g. {"status": "completed"}',
					undefined,
					undefined,
				);
			}
			headers['Content-Type'] =
				format === 'jsonPatch' ? 'application/json-patch+json' : 'application/merge-patch+json';
			return { method: 'PATCH', url: one(), headers, body: JSON.stringify(patch) };
		}
	}
	throw new ApiError(`Unknown operation '${String(operation)}'`, undefined, undefined);
}

/** A JSON request to the testing or webhooks API. */
export function apiRequest(method: IHttpRequestMethods, url: string, body?: unknown): ApiRequest {
	const headers: Record<string, string> = { ...JSON_HEADERS };
	if (body === undefined) return { method, url, headers };
	headers['Content-Type'] = 'application/json';
	return { method, url, headers, body: JSON.stringify(body) };
}

function textOf(body: unknown): string {
	if (body === undefined || body === null) return '';
	if (typeof body === 'string') return body;
	if (body instanceof Uint8Array) return Buffer.from(body).toString('utf8');
	if (body instanceof ArrayBuffer) return Buffer.from(new Uint8Array(body)).toString('utf8');
	return '';
}

/**
 * An answer body as JSON, whatever its content type said (n8n parses only
 * application/json; a FHIR server may answer application/fhir+json). Empty: null.
 */
export function parseJson(body: unknown, statusCode?: number): unknown {
	if (
		body !== null &&
		typeof body === 'object' &&
		!(body instanceof Uint8Array) &&
		!(body instanceof ArrayBuffer)
	) {
		return body;
	}
	const text = textOf(body);
	if (!text.trim()) return null;
	try {
		return JSON.parse(text);
	} catch {
		const excerpt = text.length > 200 ? text.slice(0, 200) + '…' : text;
		throw new ApiError(
			`Understudy's answer${statusCode ? ` (${statusCode})` : ''} is not JSON: ${excerpt}`,
			statusCode,
			text,
		);
	}
}

/** The text of an OperationOutcome's issues: each one's diagnostics (or details, or code). */
export function outcomeText(outcome: unknown): string | undefined {
	if (!outcome || typeof outcome !== 'object') return undefined;
	const value = outcome as IDataObject;
	if (value.resourceType !== 'OperationOutcome' || !Array.isArray(value.issue)) return undefined;
	const parts = (value.issue as IDataObject[]).map((issue) => {
		const details = issue.details as IDataObject | undefined;
		const text = issue.diagnostics ?? details?.text ?? issue.code ?? 'unknown issue';
		const where =
			Array.isArray(issue.expression) && issue.expression.length
				? ` (at ${(issue.expression as string[]).join(', ')})`
				: '';
		return `${String(text)}${where}`;
	});
	return parts.length ? parts.join('; ') : undefined;
}

/** problem+json (the non-FHIR paths): its detail, and each error's path and message. */
export function problemText(problem: unknown): string | undefined {
	if (!problem || typeof problem !== 'object') return undefined;
	const value = problem as IDataObject;
	const detail = value.detail ?? value.title;
	if (typeof detail !== 'string') return undefined;
	const errors = Array.isArray(value.errors)
		? (value.errors as IDataObject[])
				.map((e) => (e.path ? `${String(e.path)}: ${String(e.message)}` : String(e.message)))
				.filter((e) => e !== detail)
		: [];
	return errors.length ? `${detail} (${errors.join('; ')})` : detail;
}

/** Send, parse the answer as JSON, and throw an ApiError with the server's own words on 4xx/5xx. */
export async function call(
	send: Send,
	request: ApiRequest,
): Promise<{ statusCode: number; body: unknown; headers: Record<string, unknown> }> {
	const answer = await send(request);
	const statusCode = answer.statusCode;
	let body: unknown;
	try {
		body = parseJson(answer.body, statusCode);
	} catch (error) {
		if (statusCode >= 400) {
			throw new ApiError(
				`${request.method} ${request.url} answered ${statusCode}`,
				statusCode,
				textOf(answer.body),
			);
		}
		throw error;
	}
	if (statusCode >= 400) {
		const text = outcomeText(body) ?? problemText(body);
		throw new ApiError(
			text
				? `Understudy answered ${statusCode}: ${text}`
				: `${request.method} ${request.url} answered ${statusCode}`,
			statusCode,
			body,
			`${request.method} ${request.url}`,
		);
	}
	return { statusCode, body, headers: answer.headers ?? {} };
}

export interface SearchOptions {
	/** Follow `link[relation=next]` until the last page (within `limit`, when given). */
	returnAll: boolean;
	/** The most resources to return (when not returnAll); the search stops once it has them. */
	limit?: number;
	/** A safety stop against a server that loops. */
	maxPages?: number;
}

export interface SearchResult {
	resources: IDataObject[];
	/** One searchset Bundle with every page's entries, without the paging links. */
	bundle: IDataObject;
	pages: number;
}

function nextLink(bundle: IDataObject): string | undefined {
	const links = Array.isArray(bundle.link) ? (bundle.link as IDataObject[]) : [];
	const next = links.find((l) => l.relation === 'next');
	return typeof next?.url === 'string' ? next.url : undefined;
}

/** Run a search: the first page from `request`, more pages by the Bundle's next links. */
export async function search(
	send: Send,
	request: ApiRequest,
	base: string,
	options: SearchOptions,
): Promise<SearchResult> {
	const limit = options.returnAll ? Infinity : Math.max(1, options.limit ?? 50);
	const maxPages = options.maxPages ?? 1000;
	const entries: IDataObject[] = [];
	let first: IDataObject | undefined;
	let pages = 0;
	let current: ApiRequest | undefined = request;
	const seen = new Set<string>();
	while (current) {
		const { body } = await call(send, current);
		pages += 1;
		if (!body || typeof body !== 'object' || (body as IDataObject).resourceType !== 'Bundle') {
			throw new ApiError(
				`The search answered a ${body && typeof body === 'object' ? String((body as IDataObject).resourceType) : typeof body}, not a Bundle`,
				200,
				body,
			);
		}
		const bundle = body as IDataObject;
		first = first ?? bundle;
		for (const entry of Array.isArray(bundle.entry) ? (bundle.entry as IDataObject[]) : []) {
			if (entries.length >= limit) break;
			entries.push(entry);
		}
		const next = nextLink(bundle);
		if (!next || entries.length >= limit) break;
		if (seen.has(next) || pages >= maxPages) {
			throw new ApiError(
				`The search's next links do not end (page ${pages}: ${next})`,
				undefined,
				undefined,
			);
		}
		seen.add(next);
		current = {
			method: 'GET',
			url: assertUnderBase(next, base, "The Bundle's next link"),
			headers: { ...JSON_HEADERS },
		};
	}
	const merged: IDataObject = { ...(first as IDataObject), entry: entries };
	delete merged.link;
	const resources = entries
		.filter((e) => e.resource && typeof e.resource === 'object')
		.filter((e) => (e.search as IDataObject | undefined)?.mode !== 'outcome')
		.map((e) => e.resource as IDataObject);
	return { resources, bundle: merged, pages };
}

// The webhook subscription a trigger keeps at Understudy (POST/GET/DELETE /api/webhooks).
import type { IDataObject } from 'n8n-workflow';

import { WEBHOOKS_PATH, apiRequest, type ApiRequest } from './api';

export interface SubscriptionConfig {
	url: string;
	events: string[];
	resourceTypes?: string[];
}

/** Comma- or space-separated names, trimmed, without repeats. */
export function nameList(value: unknown): string[] {
	const parts = Array.isArray(value) ? value.map(String) : String(value ?? '').split(/[\s,]+/);
	return [...new Set(parts.map((p) => p.trim()).filter(Boolean))];
}

/** The events asked for: the named ones and the resource events written out. */
export function subscriptionConfig(
	url: string,
	events: unknown,
	resourceEvents: unknown,
	resourceTypes: unknown,
): SubscriptionConfig {
	const all = nameList([...nameList(events), ...nameList(resourceEvents)]);
	if (all.length === 0) throw new Error('Choose at least one event (or All Events)');
	const types = nameList(resourceTypes);
	return {
		url,
		events: all.includes('*') ? ['*'] : all,
		resourceTypes: types.length ? types : undefined,
	};
}

export function createRequest(base: string, config: SubscriptionConfig): ApiRequest {
	const body: IDataObject = { url: config.url, events: config.events };
	if (config.resourceTypes) body.resourceTypes = config.resourceTypes;
	return apiRequest('POST', base + WEBHOOKS_PATH, body);
}

export function getRequest(base: string, id: string): ApiRequest {
	return apiRequest('GET', `${base}${WEBHOOKS_PATH}/${encodeURIComponent(id)}`);
}

export function deleteRequest(base: string, id: string): ApiRequest {
	return apiRequest('DELETE', `${base}${WEBHOOKS_PATH}/${encodeURIComponent(id)}`);
}

function same(a: string[] | null | undefined, b: string[] | undefined): boolean {
	const left = [...(a ?? [])].sort();
	const right = [...(b ?? [])].sort();
	return left.length === right.length && left.every((v, i) => v === right[i]);
}

/** Whether a subscription as Understudy shows it is the one this trigger wants. */
export function matches(found: IDataObject, wanted: SubscriptionConfig): boolean {
	return (
		found.url === wanted.url &&
		found.enabled !== false &&
		same(found.events as string[], wanted.events) &&
		same(found.resourceTypes as string[] | null, wanted.resourceTypes)
	);
}
